//go:build !amd64 || purego

package precision

// bareVCVTNEPS2BF16 is nil: this build has no assembly.
var bareVCVTNEPS2BF16 func(dst *uint16, src *float32, n int)
