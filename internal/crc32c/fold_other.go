//go:build !amd64 || purego

package crc32c

// hasFold is false: this build has no folding kernel.
const hasFold = false

// useFold stays false; tests set it to hasFold.
var useFold = false

func foldKernel(r uint32, p []byte) (lo, hi uint64) { return foldGo(r, p, foldConstants) }
