package emulated

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

const (
	x86Info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx512f\n"
	armInfo = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
	// what qemu-aarch64 10 writes its guest for /proc/cpuinfo
	qemuInfo = "processor\t: 0\nmodel name\t: ARMv8 Processor rev 0 (v8l)\nBogoMIPS\t: 100.00\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x00\nCPU architecture: 8\nCPU part\t: 0x051\n"
)

// The detection: an arm64 binary on an x86 CPU's /proc/cpuinfo is
// emulated, the same binary on an Arm one is not, and the reverse; an Arm
// /proc/cpuinfo naming implementer 0x00 (qemu 8 and later write their
// own) is emulated whatever the binary; no
// file (macOS, Windows) or an unknown one is native; the override wins
// either way, and one that is not a boolean is ignored.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name, override, arch, cpuinfo string
		want                          bool
	}{
		{"arm64 on x86", "", "arm64", x86Info, true},
		{"arm64 on arm", "", "arm64", armInfo, false},
		{"amd64 on x86", "", "amd64", x86Info, false},
		{"386 on x86", "", "386", x86Info, false},
		{"amd64 on arm", "", "amd64", armInfo, true},
		{"arm64 on qemu's own cpuinfo", "", "arm64", qemuInfo, true},
		{"arm64 on qemu's own cpuinfo, override off", "0", "arm64", qemuInfo, false},
		{"arm64 on an Apple CPU", "", "arm64", strings.Replace(armInfo, "0x41", "0x61", 1), false},
		{"arm64 on an unreadable implementer", "", "arm64", strings.Replace(armInfo, "0x41", "?", 1), false},
		{"riscv64 on x86", "", "riscv64", x86Info, true},
		{"no cpuinfo", "", "arm64", "", false},
		{"unknown cpuinfo", "", "arm64", "processor\t: 0\nisa\t: rv64imafdc\n", false},
		{"override on", "1", "amd64", x86Info, true},
		{"override true", "true", "amd64", "", true},
		{"override off", "0", "arm64", x86Info, false},
		{"override false", "false", "arm64", x86Info, false},
		{"override not a boolean", "yes please", "arm64", x86Info, true},
		{"override not a boolean, native", "yes please", "amd64", x86Info, false},
	} {
		if got := decide(tc.override, tc.arch, tc.cpuinfo); got != tc.want {
			t.Errorf("%s: decide(%q, %s, …) = %v, want %v", tc.name, tc.override, tc.arch, got, tc.want)
		}
	}
}

// Is reads this process's environment and /proc/cpuinfo: on this
// machine it agrees with decide on them. Where the CPU is known, it also
// says what is true of this run: a native amd64 test on an x86 host is not
// emulated, an arm64 one on it is (CI's qemu-user stage, before qemu 8),
// and one reading qemu's own Arm description is (qemu 8 and later).
func TestIsThisProcess(t *testing.T) {
	b, _ := os.ReadFile("/proc/cpuinfo")
	override := os.Getenv(EnvVar)
	if got, want := Is(), decide(override, runtime.GOARCH, string(b)); got != want {
		t.Fatalf("Is() = %v, decide on this process's inputs = %v", got, want)
	}
	host, software := cpuinfoArch(string(b))
	switch {
	case override != "":
	case software:
		if !Is() {
			t.Error("a process reading an emulator's /proc/cpuinfo (implementer 0x00) is said to be native")
		}
		return
	case host == "x86" && runtime.GOARCH == "amd64":
		if Is() {
			t.Error("a native amd64 process on an x86 host is said to be emulated")
		}
		return
	case host == "x86" && runtime.GOARCH == "arm64":
		if !Is() {
			t.Error("an arm64 process on an x86 host is said to be native")
		}
		return
	}
	t.Logf("%s=%q, /proc/cpuinfo family %q: Is() = %v", EnvVar, override, host, Is())
}
