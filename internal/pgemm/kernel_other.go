//go:build !amd64 || purego

package pgemm

func archKernels() (*kernelSet, string) { return nil, "" }
