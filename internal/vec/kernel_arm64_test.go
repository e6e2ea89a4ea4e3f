//go:build arm64 && !purego

package vec

import "testing"

// On arm64 the GELU, LayerNorm and softmax primitives run their NEON
// kernels (the basic ops, the column sums and dropout have none), so the tests that
// compare "the kernels" with the fallbacks compare NEON.
func TestKernelNEON(t *testing.T) {
	if got, want := Kernel(), "basic go, sums go, gelu neon, norm neon, softmax neon, dropout go"; got != want {
		t.Errorf("Kernel() = %q, want %q", got, want)
	}
	if ims := geluImpls(); len(ims) != 2 || ims[0].name != "neon" {
		t.Errorf("geluImpls()[0] = %q of %d, want neon first", ims[0].name, len(ims))
	}
}
