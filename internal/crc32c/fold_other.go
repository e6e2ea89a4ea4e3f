//go:build !amd64 || purego

package crc32c

// archKernels is empty: this build has no folding kernel.
func archKernels() []*kernel { return nil }
