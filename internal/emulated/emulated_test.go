package emulated

import (
	"os"
	"runtime"
	"testing"
)

const (
	x86Info = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse avx512f\n"
	armInfo = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n"
)

// The detection: an arm64 binary on an x86 CPU's /proc/cpuinfo is
// emulated, the same binary on an Arm one is not, and the reverse; no
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
// emulated, an arm64 one on it is (CI's qemu-user stage).
func TestIsThisProcess(t *testing.T) {
	b, _ := os.ReadFile("/proc/cpuinfo")
	override := os.Getenv(EnvVar)
	if got, want := Is(), decide(override, runtime.GOARCH, string(b)); got != want {
		t.Fatalf("Is() = %v, decide on this process's inputs = %v", got, want)
	}
	if override != "" || cpuinfoArch(string(b)) != "x86" {
		t.Logf("%s=%q, /proc/cpuinfo family %q: Is() = %v", EnvVar, override, cpuinfoArch(string(b)), Is())
		return
	}
	switch runtime.GOARCH {
	case "amd64":
		if Is() {
			t.Error("a native amd64 process on an x86 host is said to be emulated")
		}
	case "arm64":
		if !Is() {
			t.Error("an arm64 process on an x86 host is said to be native")
		}
	}
}
