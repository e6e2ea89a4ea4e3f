package precision

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kernelSets returns one kernel set per combination worth running: the
// scalar code alone, and each kernel of each operation in turn.
func kernelSets() map[string]kernelSet {
	l := archKernels()
	sets := map[string]kernelSet{"go": {}}
	n := max(len(l.encFP16), len(l.encBF16), len(l.decFP16), len(l.decBF16), len(l.abs))
	for i := range n {
		var s kernelSet
		name := ""
		if i < len(l.encFP16) {
			s.encFP16 = l.encFP16[i]
			name += " encfp16=" + s.encFP16.name
		}
		if i < len(l.encBF16) {
			s.encBF16 = l.encBF16[i]
			name += " encbf16=" + s.encBF16.name
		}
		if i < len(l.decFP16) {
			s.decFP16 = l.decFP16[i]
			name += " decfp16=" + s.decFP16.name
		}
		if i < len(l.decBF16) {
			s.decBF16 = l.decBF16[i]
			name += " decbf16=" + s.decBF16.name
		}
		if i < len(l.abs) {
			s.abs = l.abs[i]
			name += " abs=" + s.abs.name
		}
		sets[name] = s
	}
	return sets
}

// withKernels runs f with the package's active kernels set to s.
func withKernels(s kernelSet, f func()) {
	old := active
	active = s
	defer func() { active = old }()
	f()
}

// randomBits returns n float32s with random bit patterns, a mix of every
// class (NaNs, infinities, subnormals, normals).
func randomBits(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(rng.Uint32())
	}
	return x
}

// TestSliceConversions checks every slice conversion, with each kernel set
// and lengths that leave every size of tail, against the scalar functions.
func TestSliceConversions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for name, ks := range kernelSets() {
		withKernels(ks, func() {
			for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 63, 64, 65, 100, 1031} {
				src := randomBits(rng, n)
				h := make([]uint16, n+1) // one longer: dst may be
				for _, c := range []struct {
					name   string
					enc    func([]uint16, []float32)
					scalar func(float32) uint16
				}{
					{"EncodeFP16", EncodeFP16, ToFP16}, {"EncodeFP16Sat", EncodeFP16Sat, ToFP16Sat},
					{"EncodeBF16", EncodeBF16, ToBF16}, {"EncodeBF16Sat", EncodeBF16Sat, ToBF16Sat},
				} {
					h[n] = 0xABCD
					c.enc(h, src)
					for i, x := range src {
						if w := c.scalar(x); h[i] != w {
							t.Fatalf("%s: %s(n=%d)[%d] of %#08x = %#04x, want %#04x", name, c.name, n, i, math.Float32bits(x), h[i], w)
						}
					}
					if h[n] != 0xABCD {
						t.Fatalf("%s: %s(n=%d) wrote past len(src)", name, c.name, n)
					}
				}
				hs := make([]uint16, n)
				for i := range hs {
					hs[i] = uint16(rng.Uint32())
				}
				f := make([]float32, n)
				for _, c := range []struct {
					name   string
					dec    func([]float32, []uint16)
					scalar func(uint16) float32
				}{{"DecodeFP16", DecodeFP16, FromFP16}, {"DecodeBF16", DecodeBF16, FromBF16}} {
					c.dec(f, hs)
					for i, v := range hs {
						if g, w := math.Float32bits(f[i]), math.Float32bits(c.scalar(v)); g != w {
							t.Fatalf("%s: %s(n=%d)[%d] of %#04x = %#08x, want %#08x", name, c.name, n, i, v, g, w)
						}
					}
				}
			}
		})
	}
}

// TestSliceShortDst checks that a short dst panics with a message.
func TestSliceShortDst(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("EncodeBF16 with a short dst did not panic")
		}
	}()
	EncodeBF16(make([]uint16, 3), make([]float32, 4))
}

// TestCheckCatchesMismatch is the negative control of the exhaustive
// harness: a bf16 conversion that truncates instead of rounding must be
// reported on one chunk.
func TestCheckCatchesMismatch(t *testing.T) {
	s := newNarrowScratch()
	src := make([]float32, 1<<chunkBits)
	for i := range src {
		src[i] = math.Float32frombits(0x3F800000 + uint32(i))
	}
	setWant(s, src, bf16Ref{}, bf16Inf, bf16Max)
	for i, x := range src {
		s.got[i] = uint16(math.Float32bits(x) >> 16)
	}
	r := newReport()
	compare(r, "truncation", src, s.got, s.want)
	if r.count["truncation"] == 0 {
		t.Fatal("truncating bf16 conversion not reported")
	}
}

// TestRoundBF16 checks the in-place round trip against the scalar casts
// with each kernel set, on lengths around its chunk, and that it rounds
// (a value with low mantissa bits changes).
func TestRoundBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for name, s := range kernelSets() {
		withKernels(s, func() {
			for _, n := range []int{0, 1, 17, roundChunk - 1, roundChunk, 2*roundChunk + 33} {
				x := randomBits(rng, n)
				want := make([]float32, n)
				for i, v := range x {
					want[i] = FromBF16(ToBF16(v))
				}
				RoundBF16(x)
				for i := range x {
					if math.Float32bits(x[i]) != math.Float32bits(want[i]) && !(x[i] != x[i] && want[i] != want[i]) {
						t.Fatalf("%s n=%d: x[%d] = %#x, want %#x", name, n, i, math.Float32bits(x[i]), math.Float32bits(want[i]))
					}
				}
			}
		})
	}
	x := []float32{1 + 0x1p-20}
	if RoundBF16(x); x[0] != 1 {
		t.Fatalf("RoundBF16(1+2^-20) = %v, want 1", x[0])
	}
}
