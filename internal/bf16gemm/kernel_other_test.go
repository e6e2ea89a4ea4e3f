//go:build !amd64 || purego

package bf16gemm

// amd64Asm reports whether this build has the assembly kernels.
const amd64Asm = false
