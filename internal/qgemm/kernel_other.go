//go:build !amd64 || purego

package qgemm

func archKernels() []*kernel { return nil }
