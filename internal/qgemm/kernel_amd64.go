//go:build amd64 && !purego

package qgemm

// archKernels lists the assembly kernels this CPU runs, best first.
func archKernels() []*kernel { return nil }
