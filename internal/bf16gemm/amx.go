//go:build amd64 && !purego

package bf16gemm

import "os"

// bf16Off reports whether GPTLAB_BF16=off disables the bf16 hardware paths.
func bf16Off() bool { return os.Getenv("GPTLAB_BF16") == "off" }

// amxKernel returns the AMX kernel if the hardware, the OS and the
// self-test allow it, or nil and why not.
func amxKernel() (*kernel, string) {
	if bf16Off() {
		return nil, "disabled by GPTLAB_BF16=off"
	}
	if ok, why := amxHardware(); !ok {
		return nil, why
	}
	if err := amxPermission(); err != nil {
		return nil, err.Error()
	}
	k := stripKernel("amx", 32, 32, 32, true, amxStripFunc)
	if why := selfTest(k); why != "" {
		return nil, "self-test: " + why
	}
	return k, ""
}
