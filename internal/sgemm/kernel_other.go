//go:build !(amd64 || arm64) || purego

package sgemm

// archKernels returns no assembly kernels: this build uses the Go kernel.
func archKernels() []*kernel { return nil }
