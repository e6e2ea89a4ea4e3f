package bf16gemm

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// EnvPath is the environment variable that forces a path for
// comparisons: widen, avx512bf16 or amx (one this machine runs), or off
// (the hardware paths not even probed: widen alone). Unset, every shape
// takes the path its calibration found fastest.
const EnvPath = "GPTLAB_BF16"

// pathImpl is a way of computing Gemm: a packed kernel, or nil for widen.
type pathImpl struct {
	name string
	kern *kernel
}

// knownPaths are the path names there are, on any machine.
var knownPaths = []string{"widen", "avx512bf16", "amx"}

var (
	pathOnce sync.Once
	paths    []pathImpl // available: widen first, then the hardware paths (set once)
	amxWhy   string     // why AMX is not available ("" if it is; set once)
	envErr   error      // a bad GPTLAB_BF16 (set once)

	pathMu  sync.Mutex
	forced  *pathImpl            // nil: each shape's calibrated choice
	byEnv   bool                 // forced is GPTLAB_BF16's
	choices map[shapeKey]*Choice // the calibrated shapes
)

// initPaths finds the paths this machine runs (running the AMX checks and
// self-test) and applies GPTLAB_BF16, on first use.
func initPaths() { pathOnce.Do(findPaths) }

func findPaths() {
	paths = append(paths, pathImpl{"widen", nil})
	if k := dotKernel(); k != nil {
		paths = append(paths, pathImpl{"avx512bf16", k})
	}
	k, why := amxKernel()
	if k != nil {
		paths = append(paths, pathImpl{"amx", k})
	}
	// "" with the kernel: set either way, so that a second findPaths (the
	// tests' rerun) keeps no stale reason.
	amxWhy = why
	envErr = applyEnv(os.Getenv(EnvPath))
}

// applyEnv applies a value of GPTLAB_BF16 ("" and off leave the
// calibrated choice: off has already kept the hardware paths out).
func applyEnv(v string) error {
	if v == "" || v == "off" {
		return nil
	}
	pathMu.Lock()
	defer pathMu.Unlock()
	if err := setPath(v); err != nil {
		return fmt.Errorf("bf16gemm: %s=%s: %w", EnvPath, v, err)
	}
	byEnv = true
	return nil
}

// EnvError reports a bad GPTLAB_BF16: a value that names no path, or a
// path this machine does not run. Commands check it at start; Gemm panics
// with it rather than run another path than the one asked for.
func EnvError() error {
	initPaths()
	return envErr
}

// choose is the path of a product of shape key: the forced one, or the
// shape's calibrated choice (calibrating it on first use).
func choose(key shapeKey) pathImpl {
	initPaths()
	if envErr != nil {
		panic(envErr.Error())
	}
	pathMu.Lock()
	defer pathMu.Unlock()
	if forced != nil {
		return *forced
	}
	if len(paths) == 1 {
		return paths[0]
	}
	c, ok := choices[key]
	if !ok {
		c = calibrate(key, paths)
		if choices == nil {
			choices = map[shapeKey]*Choice{}
		}
		choices[key] = c
	}
	return paths[c.chosen]
}

// Paths lists the paths this machine runs: widen, then the hardware
// paths it has (avx512bf16, amx) in that order.
func Paths() []string {
	initPaths()
	return pathNames()
}

func pathNames() []string {
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = p.name
	}
	return names
}

// Mode is the path every product takes when one is forced (SetPath,
// GPTLAB_BF16), else "auto": each shape its calibrated choice.
func Mode() string {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	if forced != nil {
		return forced.name
	}
	return "auto"
}

// SetPath forces the path called name for every product, or with "auto"
// returns each shape to its calibrated choice; it fails if this machine
// cannot run the path (for AMX, AMXStatus says why).
func SetPath(name string) error {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	return setPath(name)
}

// setPath is SetPath with pathMu held.
func setPath(name string) error {
	if name == "auto" {
		forced, byEnv = nil, false
		return nil
	}
	for i := range paths {
		if paths[i].name == name {
			forced, byEnv = &paths[i], false
			return nil
		}
	}
	if !slices.Contains(knownPaths, name) {
		return fmt.Errorf("unknown bf16 path %q (want %s, auto or off)", name, strings.Join(knownPaths, ", "))
	}
	why := ""
	if name == "amx" {
		why = ": " + amxWhy
	}
	return fmt.Errorf("bf16 path %q not available on this machine%s (it has %s)", name, why, strings.Join(pathNames(), ", "))
}

// Path says how products run now, as every report's kernels line names
// it: the forced path ("widen (GPTLAB_BF16)" when the environment forced
// it), "widen" where no hardware path exists, or the calibrated choices,
// "calibrated: avx512bf16 ×5, widen ×7" (before any product, the
// candidates).
func Path() string {
	initPaths()
	pathMu.Lock()
	defer pathMu.Unlock()
	switch {
	case forced != nil && byEnv:
		return forced.name + " (" + EnvPath + ")"
	case forced != nil:
		return forced.name + " (forced)"
	case len(paths) == 1 && os.Getenv(EnvPath) == "off":
		return "widen (" + EnvPath + "=off)"
	case len(paths) == 1:
		return "widen"
	}
	count := make([]int, len(paths))
	for _, c := range choices {
		count[c.chosen]++
	}
	var parts []string
	for i, p := range paths {
		if count[i] > 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", p.name, count[i]))
		}
	}
	if len(parts) == 0 {
		return "calibrated per shape on first use among " + strings.Join(pathNames(), ", ")
	}
	return "calibrated: " + strings.Join(parts, ", ")
}

// AMXStatus reports whether the AMX path is available and, if not, why
// (no AMX in the CPU, the OS's tile state not enabled or not granted,
// GPTLAB_BF16=off, or the self-test's mismatch).
func AMXStatus() (ok bool, reason string) {
	initPaths()
	return amxWhy == "", amxWhy
}
