package reports

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"gptlab/internal/emulated"
)

// Env describes where a report was measured.
type Env struct {
	Go    string `json:"go"`
	OS    string `json:"os"`
	Arch  string `json:"arch"`
	CPU   string `json:"cpu"`
	Cores int    `json:"cores"`
	// Emulated says the process ran under user-mode emulation (qemu-user:
	// internal/emulated), its times the emulator's and CPU the host's.
	Emulated bool   `json:"emulated"`
	Commit   string `json:"commit"`
	// Modified says whether the tree the binary was built from had
	// uncommitted changes (Commit then ends in +dirty); null when unknown.
	Modified *bool  `json:"modified"`
	Time     string `json:"time"`
	// Wall is the run's wall time in seconds (0: not measured, as for a
	// command that is not a lab).
	Wall float64 `json:"wall_s"`
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
	return fmt.Sprintf("%s, %d cores, %s %s", e.CPU, e.Cores, e.Go, e.platform())
}

// platform is os/arch, and under emulation says so: "linux/arm64,
// emulated (qemu-user)".
func (e Env) platform() string {
	p := e.OS + "/" + e.Arch
	if e.Emulated {
		p += ", " + emulated.Label
	}
	return p
}

// buildLine is the commit and the wall time: "commit 1a2b3c4 (modified),
// 12.3 s".
func (e Env) buildLine() string {
	c := e.Commit
	if base, dirty := strings.CutSuffix(c, "+dirty"); dirty {
		c = base[:min(12, len(base))] + " (modified)"
	} else if c != "unknown" {
		c = c[:min(12, len(c))]
	}
	line := "commit " + c
	if e.Wall > 0 {
		line += fmt.Sprintf(", wall time %.1f s", e.Wall)
	}
	return line
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
		Go:       runtime.Version(),
		OS:       runtime.GOOS,
		Arch:     runtime.GOARCH,
		CPU:      cpuName(),
		Cores:    runtime.NumCPU(),
		Emulated: emulated.Is(),
		Commit:   "unknown",
		Time:     time.Now().UTC().Format(time.RFC3339),
	}
	for _, k := range kernelNamers {
		e.Kernels.Set(k.component, k.name())
	}
	e.Commit, e.Modified = buildCommit()
	return e
}

// buildCommit is the commit the binary was built from and whether the tree
// was modified: the VCS stamps of go build (runtime/debug.ReadBuildInfo),
// else, where the build carries none (-buildvcs=false, go test), git asked
// once in the gptlab module that holds the working directory, else unknown.
var buildCommit = sync.OnceValues(func() (string, *bool) {
	commit, modified := "unknown", (*bool)(nil)
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				m := s.Value == "true"
				modified = &m
			}
		}
	}
	if commit == "unknown" {
		commit, modified = gitCommit()
	}
	if modified != nil && *modified && commit != "unknown" {
		commit += "+dirty"
	}
	return commit, modified
})

// gitCommit asks git for HEAD and for uncommitted changes to tracked files
// in the gptlab module above the working directory (within two seconds;
// nothing is written). Anything amiss gives unknown.
func gitCommit() (string, *bool) {
	root := moduleRoot()
	if root == "" {
		return "unknown", nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	git := func(args ...string) (string, bool) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", root}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0") // status takes no index lock
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	head, ok := git("rev-parse", "HEAD")
	if !ok || len(head) < 7 || strings.Trim(head, "0123456789abcdef") != "" {
		return "unknown", nil
	}
	status, ok := git("status", "--porcelain", "--untracked-files=no")
	if !ok {
		return head, nil
	}
	modified := status != ""
	return head, &modified
}

// moduleRoot is the directory above the working directory whose go.mod
// declares module gptlab, or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			first, _, _ := strings.Cut(string(data), "\n")
			if strings.TrimSpace(first) == "module gptlab" {
				return dir
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
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
