//go:build !amd64 || purego

package pgemm

// asmSets are the sets of kernels that run on this machine: none.
func asmSets() []namedSet { return nil }
