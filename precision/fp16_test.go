package precision

import (
	"testing"

	"github.com/x448/float16"
)

// refFP16 is the reference narrowing, x448/float16's.
func refFP16(x float32) uint16 { return float16.Fromfloat32(x).Bits() }

type fp16Ref struct{}

func (fp16Ref) ref(x float32) uint16 { return refFP16(x) }

// TestFP16Exhaustive checks ToFP16, ToFP16Sat and every fp16 kernel this
// machine runs against github.com/x448/float16 (its Fromfloat32 rounds to
// nearest even and quiets NaNs keeping the top payload bits) for all 2^32
// float32 inputs; the saturating want is x448's result with finite
// overflows set to ±65504.
func TestFP16Exhaustive(t *testing.T) {
	ks := archKernels().encFP16
	r := newReport()
	forAllFloat32(t, newNarrowScratch, func(src []float32, s narrowScratch) {
		setWant(s, src, fp16Ref{}, fp16Inf, fp16Max)
		for i, x := range src {
			s.got[i] = ToFP16(x)
		}
		compare(r, "ToFP16", src, s.got, s.want)
		for i, x := range src {
			s.got[i] = ToFP16Sat(x)
		}
		compare(r, "ToFP16Sat", src, s.got, s.wantSat)
		checkKernels(r, ks, src, s)
	})
	r.fail(t)
	t.Logf("checked ToFP16, ToFP16Sat and the kernels %v", encKernelNames(ks))
}
