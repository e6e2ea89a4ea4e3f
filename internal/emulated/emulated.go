// Package emulated tells whether this process runs under user-mode
// emulation (qemu-user: a binary of one architecture executed, instruction
// by instruction, on a CPU of another), where times are the emulator's and
// tests that train or time at full size take tens of times longer.
//
// It needs no setting: on Linux, qemu-user before 8 passes the host's
// /proc/cpuinfo through, so an arm64 binary reading an x86 CPU's
// description (or an x86 binary reading an arm64 one) is emulated; qemu 8
// and later write an Arm guest a /proc/cpuinfo of their own, whose CPU
// implementer is 0x00 (the code Arm reserves for software: no Arm CPU
// made in silicon has it), so an Arm description naming that implementer
// is emulated too. The environment variable
// GPTLAB_EMULATED overrides the detection: 1 (or true) says emulated, 0
// (or false) says native.
package emulated

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// EnvVar overrides the detection: a boolean (1, true, 0, false).
const EnvVar = "GPTLAB_EMULATED"

// Label is how a report or a skipped benchmark names the condition.
const Label = "emulated (qemu-user)"

// Is reports whether this process runs under user-mode emulation: EnvVar
// when set to a boolean, else what /proc/cpuinfo says against GOARCH
// (false where there is no /proc/cpuinfo). Decided once per process.
func Is() bool { return is() }

var is = sync.OnceValue(func() bool {
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	return decide(os.Getenv(EnvVar), runtime.GOARCH, string(cpuinfo))
})

// decide is Is on given inputs: the override's value (""when unset), the
// binary's architecture and the text of /proc/cpuinfo ("" when absent).
// An override that is not a boolean is ignored.
func decide(override, arch, cpuinfo string) bool {
	if b, err := strconv.ParseBool(strings.TrimSpace(override)); err == nil {
		return b
	}
	host, software := cpuinfoArch(cpuinfo)
	return software || host != "" && host != family(arch)
}

// family groups GOARCH values by the /proc/cpuinfo they would read
// natively: "x86" or "arm", or the architecture itself.
func family(arch string) string {
	switch arch {
	case "amd64", "386":
		return "x86"
	case "arm64", "arm":
		return "arm"
	}
	return arch
}

// cpuinfoArch is the family whose /proc/cpuinfo this is: x86's has
// vendor_id lines, Arm's CPU implementer lines; "" for neither (another
// architecture, or no file), which never counts as emulated. software
// reports an Arm implementer of 0x00, an emulator's CPU.
func cpuinfoArch(cpuinfo string) (arch string, software bool) {
	for line := range strings.Lines(cpuinfo) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "vendor_id":
			return "x86", false
		case "CPU implementer":
			n, err := strconv.ParseUint(strings.TrimSpace(v), 0, 8)
			return "arm", err == nil && n == 0
		}
	}
	return "", false
}
