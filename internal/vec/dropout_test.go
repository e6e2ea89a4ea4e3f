package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

// dropoutInputs are x for the dropout tests: random values with every
// special value among them (signed zeros, infinities, NaN, subnormals), so
// that a kernel which zeroed dropped lanes instead of multiplying them by
// zero (-0·0 is -0, ∞·0 is NaN) gives other bits.
func dropoutInputs(n int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float32, n)
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.SmallestNonzeroFloat32, -math.MaxFloat32, 1}
	for i := range x {
		if i%7 == 3 {
			x[i] = special[(i/7)%len(special)]
			continue
		}
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

// bitsEqual reports the first index where a and b differ in their bits,
// or -1.
func bitsEqual(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestDropoutMulImpls: every kernel this CPU runs gives the Go loop's bits
// on every length (whole vectors and a tail), probability and key, in
// place and not; the Go loop keeps a fraction 1-p, scaled by keep.
func TestDropoutMulImpls(t *testing.T) {
	const keyRef = 0x123456789abcdef
	for _, im := range dropoutImpls() {
		for _, p := range []float64{0, 0.1, 0.5, 0.9, 1 - 0x1p-24} {
			thresh := uint32(p * (1 << 24))
			keep := float32(1 / (1 - p))
			for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 1000, 4099} {
				for _, key := range []uint64{0, keyRef, math.MaxUint64} {
					name := fmt.Sprintf("%s/p=%v/n=%d/key=%x", im.name, p, n, key)
					x := dropoutInputs(n, key^uint64(n))
					want := make([]float32, n)
					dropoutGo(want, x, key, thresh, keep)
					got := make([]float32, n)
					run := func(dst, x []float32) {
						m := 0
						if im.kernel != nil && n >= im.width {
							m = n / im.width * im.width
							im.kernel(&dst[0], &x[0], m, key, uint64(thresh), keep)
						}
						dropoutGo(dst[m:], x[m:], key+uint64(m)*Golden, thresh, keep)
					}
					run(got, x)
					if i := bitsEqual(got, want); i >= 0 {
						t.Fatalf("%s: element %d = %v, want %v", name, i, got[i], want[i])
					}
					run(x, x) // in place
					if i := bitsEqual(x, want); i >= 0 {
						t.Fatalf("%s in place: element %d = %v, want %v", name, i, x[i], want[i])
					}
				}
			}
		}
	}
}

// TestDropoutMulMask: the Go loop multiplies by 0 or keep, drops about a
// fraction p, and its pieces drawn from their own counters make the whole;
// pieces all drawn from the first counter do not (the control).
func TestDropoutMulMask(t *testing.T) {
	const n = 200_000
	p := 0.3
	thresh := uint32(p * (1 << 24)) // rounded down, as the models' masks are
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	keep := float32(1 / (1 - p))
	m := make([]float32, n)
	DropoutMul(m, ones, 42, thresh, keep)
	zeros := 0
	for i, v := range m {
		switch v {
		case 0:
			zeros++
		case keep:
		default:
			t.Fatalf("mask element %d = %v, want 0 or %v", i, v, keep)
		}
	}
	if f := float64(zeros) / n; math.Abs(f-p) > 0.005 {
		t.Errorf("dropped fraction %v, want %v ± 0.005", f, p)
	}
	got, wrong := make([]float32, n), make([]float32, n)
	cuts := []int{0, 5, 4096, 4101, 100_000, n}
	for i := range cuts[1:] {
		lo, hi := cuts[i], cuts[i+1]
		DropoutMul(got[lo:hi], ones[lo:hi], 42+uint64(lo)*Golden, thresh, keep)
		DropoutMul(wrong[lo:hi], ones[lo:hi], 42, thresh, keep)
	}
	if i := bitsEqual(got, m); i >= 0 {
		t.Errorf("pieces from their own counters differ from the whole at %d", i)
	}
	if bitsEqual(wrong, m) < 0 {
		t.Errorf("pieces all from the first counter equal the whole mask")
	}
}

// TestDropoutAsmAVX2Only checks that the AVX2 kernel uses only the 16
// vector registers of AVX2 (avo's allocator may take Y16-Y31, which fault
// without AVX-512).
func TestDropoutAsmAVX2Only(t *testing.T) {
	src, err := os.ReadFile("dropout_amd64.s")
	if err != nil {
		t.Skipf("dropout_amd64.s: %v (run from the package's directory)", err)
	}
	_, body, ok := strings.Cut(string(src), "TEXT ·dropoutAVX2(SB)")
	if !ok {
		t.Fatal("dropout_amd64.s has no dropoutAVX2")
	}
	if m := regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`).FindString(body); m != "" {
		t.Errorf("dropoutAVX2 uses %s, an AVX-512 register", m)
	}
}

func BenchmarkDropoutMul(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	x := dropoutInputs(1<<14, 1)
	dst := make([]float32, len(x))
	for _, im := range dropoutImpls() {
		b.Run(im.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m := 0
				if im.kernel != nil {
					m = len(x) / im.width * im.width
					im.kernel(&dst[0], &x[0], m, 7, 1<<22, 1.25)
				}
				dropoutGo(dst[m:], x[m:], 7, 1<<22, 1.25)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/elem")
		})
	}
}
