//go:build !amd64 || purego

package bf16gemm

// dotKernel returns nil: this build has no assembly.
func dotKernel() *kernel { return nil }

// amxKernel returns nil: this build has no assembly.
func amxKernel() (*kernel, string) { return nil, "no AMX kernel in this build (not amd64, or purego)" }
