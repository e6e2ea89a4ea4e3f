//go:build !amd64 || purego

package precision

// archKernels returns no vector kernels: this build runs the scalar code.
func archKernels() kernelLists { return kernelLists{} }
