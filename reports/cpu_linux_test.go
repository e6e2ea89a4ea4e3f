package reports

import (
	"strings"
	"testing"
)

// The processor's name from /proc/cpuinfo: x86's model name, arm64's
// implementer and part.
func TestCPUInfoName(t *testing.T) {
	for _, tc := range []struct{ cpuinfo, want string }{
		{"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R45 96-Core Processor\nflags\t\t: fpu\n", "AMD EPYC 9R45 96-Core Processor"},
		{"processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n" +
			"processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd40\n", "Arm Neoverse-N1"},
		{"CPU implementer\t: 0x41\nCPU part\t: 0xfff\n", "Arm part 0xfff"},
		{"CPU implementer\t: 0x99\nCPU part\t: 0x1\n", "implementer 0x99 part 0x1"},
		{"processor\t: 0\n", ""},
	} {
		if got := cpuinfoName(strings.NewReader(tc.cpuinfo)); got != tc.want {
			t.Errorf("cpuinfoName(%.40q...) = %q, want %q", tc.cpuinfo, got, tc.want)
		}
	}
}

// Under user-mode emulation an arm64 binary reads the host's x86
// /proc/cpuinfo: the name says the CPU is emulated; a native one is left
// alone.
func TestEmulatedName(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
	arm := "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
	for _, tc := range []struct{ arch, cpuinfo, name, want string }{
		{"arm64", x86, "AMD EPYC", "AMD EPYC, emulating arm64 (times are the emulator's)"},
		{"amd64", x86, "AMD EPYC", "AMD EPYC"},
		{"arm64", arm, "Arm Neoverse-N1", "Arm Neoverse-N1"},
		{"arm64", "vendor_id\t: GenuineIntel\n", "Intel", "Intel, emulating arm64 (times are the emulator's)"},
	} {
		if got := emulatedName(tc.arch, []byte(tc.cpuinfo), tc.name); got != tc.want {
			t.Errorf("emulatedName(%s, %.30q) = %q, want %q", tc.arch, tc.cpuinfo, got, tc.want)
		}
	}
}
