package reports

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Env describes where a report was measured.
type Env struct {
	Go     string `json:"go"`
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Commit string `json:"commit"`
	Time   string `json:"time"`
	// Kernels names the code chosen at run time for each component
	// ("matmul": "sgemm/avx512", …), as NameKernel registered them.
	Kernels Values `json:"kernels"`
}

// kernelNamers are the components NameKernel registered, in order.
var kernelNamers []struct {
	component string
	name      func() string
}

// NameKernel makes every report's environment name the kernel a component
// runs, as name reports it when the report is stamped. Packages register
// in init; the reports package knows no kernels itself.
func NameKernel(component string, name func() string) {
	kernelNamers = append(kernelNamers, struct {
		component string
		name      func() string
	}{component, name})
}

// summary is the environment for a text report's env line: the CPU,
// its cores, the toolchain.
func (e Env) summary() string {
	return fmt.Sprintf("%s, %d cores, %s %s/%s", e.CPU, e.Cores, e.Go, e.OS, e.Arch)
}

// kernelLine is the kernels as one phrase: "matmul: sgemm/avx512, …".
func (e Env) kernelLine() string {
	var parts []string
	for _, k := range e.Kernels.Keys() {
		v, _ := e.Kernels.Get(k)
		parts = append(parts, fmt.Sprintf("%s: %v", k, v))
	}
	return strings.Join(parts, ", ")
}

// CurrentEnv reads the toolchain, processor and build commit of this process.
func CurrentEnv() Env {
	e := Env{
		Go:     runtime.Version(),
		OS:     runtime.GOOS,
		Arch:   runtime.GOARCH,
		CPU:    cpuName(),
		Cores:  runtime.NumCPU(),
		Commit: "unknown",
		Time:   time.Now().UTC().Format(time.RFC3339),
	}
	for _, k := range kernelNamers {
		e.Kernels.Set(k.component, k.name())
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				e.Commit = s.Value
			case "vcs.modified":
				if s.Value == "true" && e.Commit != "unknown" {
					e.Commit += "+dirty"
				}
			}
		}
	}
	return e
}

// cpuName is the processor's name as the system gives it (cpu_*.go:
// /proc/cpuinfo on Linux, sysctl on macOS, the registry on Windows), or
// else one that names the system and architecture, never "".
func cpuName() string {
	if n := systemCPUName(); n != "" {
		return n
	}
	return runtime.GOOS + "/" + runtime.GOARCH + " processor"
}
