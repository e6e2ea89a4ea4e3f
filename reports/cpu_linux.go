package reports

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// systemCPUName reads /proc/cpuinfo. Under user-mode emulation that is the
// host's (Env.Emulated says so).
func systemCPUName() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	return cpuinfoName(bytes.NewReader(b))
}

// cpuinfoName is the first "model name" of a /proc/cpuinfo (x86 and some
// others), or on arm64, which has none, the first core's implementer and
// part as Arm's names for them ("Arm Neoverse-N1"), or "" when neither is
// there.
func cpuinfoName(r io.Reader) string {
	var implementer, part string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch {
		case k == "model name" && v != "":
			return v
		case k == "CPU implementer" && implementer == "":
			implementer = v
		case k == "CPU part" && part == "":
			part = v
		}
	}
	if implementer == "" {
		return ""
	}
	impl, err1 := strconv.ParseUint(implementer, 0, 16)
	pt, err2 := strconv.ParseUint(part, 0, 16)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("arm64 (implementer %s, part %s)", implementer, part)
	}
	vendor, ok := armImplementers[impl]
	if !ok {
		vendor = fmt.Sprintf("implementer %#x", impl)
	}
	if name, ok := armParts[[2]uint64{impl, pt}]; ok {
		return vendor + " " + name
	}
	return fmt.Sprintf("%s part %#x", vendor, pt)
}

// armImplementers and armParts are the MIDR codes of the common arm64
// cores (Linux's arch/arm64/include/asm/cputype.h).
var armImplementers = map[uint64]string{0x41: "Arm", 0x61: "Apple", 0xc0: "Ampere", 0x46: "Fujitsu", 0x48: "HiSilicon", 0x51: "Qualcomm"}

var armParts = map[[2]uint64]string{
	{0x41, 0xd03}: "Cortex-A53", {0x41, 0xd08}: "Cortex-A72", {0x41, 0xd0b}: "Cortex-A76",
	{0x41, 0xd0c}: "Neoverse-N1", {0x41, 0xd40}: "Neoverse-V1", {0x41, 0xd49}: "Neoverse-N2",
	{0x41, 0xd4f}: "Neoverse-V2", {0x41, 0xd84}: "Neoverse-V3", {0x41, 0xd8e}: "Neoverse-N3",
	{0xc0, 0xac3}: "AmpereOne", {0x46, 0x001}: "A64FX", {0x48, 0xd01}: "Kunpeng-920",
}
