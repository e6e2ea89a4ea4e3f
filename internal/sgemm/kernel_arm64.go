//go:build arm64 && !purego

package sgemm

// kernelNEON8x8P computes an 8×8 tile of C from a packed A panel and a
// packed B panel (kernel_arm64.s: NEON, fused multiply-adds in the order
// of the depth).
//
//go:noescape
func kernelNEON8x8P(k int, a *float32, lda int, b *float32, c *float32, ldc int, alpha float32, acc bool)

// archKernels returns the NEON kernel: every arm64 CPU Go runs on has
// Advanced SIMD, so it is chosen whenever this is an arm64 build (the
// purego tag leaves the Go kernel alone). A is packed (no in-place forms
// yet) and the last columns of a panel go through the driver's edge
// tile.
func archKernels() []*kernel {
	return []*kernel{{name: "neon", mr: 8, nr: 8, mc: 128, kc: 256, nc: 2048, packed: kernelNEON8x8P}}
}
