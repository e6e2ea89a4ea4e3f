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
