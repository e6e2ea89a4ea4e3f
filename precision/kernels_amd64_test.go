//go:build amd64 && !purego

package precision

// bareVCVTNEPS2BF16 runs the bare instruction over whole groups of 16, for
// the check of its emulation (nil where the kernels are not built).
var bareVCVTNEPS2BF16 = vcvtneps2bf16Raw
