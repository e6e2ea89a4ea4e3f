package bf16gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gptlab/internal/sgemm"
	"gptlab/precision"
)

// TestDotTileInPlaceAgainstEmulation compares the real in-place tile with
// its emulation bit for bit, on rows of every kind of value, a row stride
// that is no multiple of anything, from zero and accumulating.
func TestDotTileInPlaceAgainstEmulation(t *testing.T) {
	k := dotKernel()
	if k == nil || k.inPlace == nil {
		t.Skip("no AVX512_BF16 here: the in-place tile's contract is tested through emuDotTileInPlace only")
	}
	rng := rand.New(rand.NewPCG(4, 5))
	special := []uint16{0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0x3F80}
	for _, pairs := range []int{0, 1, 3, 16, 40} {
		for trial := range 10 {
			lda := 2*pairs + 7 // in values: the rows' dwords are unaligned in odd rows
			a := make([]uint16, dotMR*lda+1)
			for i := range a {
				a[i] = precision.ToBF16(float32(rng.NormFloat64()))
				if trial >= 5 && rng.IntN(4) == 0 {
					a[i] = special[rng.IntN(len(special))]
				}
			}
			b := make([]uint16, 2*dotNR*max(pairs, 1))
			for i := range b {
				b[i] = precision.ToBF16(float32(rng.NormFloat64()))
			}
			ldc := dotNR + 5
			got, want := make([]float32, dotMR*ldc), make([]float32, dotMR*ldc)
			for i := range got {
				got[i] = float32(rng.NormFloat64())
				want[i] = got[i]
			}
			acc := trial%2 == 1
			k.inPlace(pairs, &a[1], 2*lda, 4, &b[0], &got[0], ldc, acc)
			emuDotTileInPlace(pairs, &a[1], 2*lda, 4, &b[0], &want[0], ldc, acc)
			for i := range got {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("pairs %d trial %d: C[%d] = %v, emulation %v", pairs, trial, i, got[i], want[i])
				}
			}
		}
	}
}

// causalCase is one causal product's operands: a is A (ABt: t×k) or L
// (t×t, zero above its diagonal), b is B (ABt: t×k; else t×n), each
// with a row stride wider than its rows, and C's stride ldc.
type causalCase struct {
	kind          CausalKind
	t, d          int
	a, b          []uint16
	lda, ldb, ldc int
}

func newCausalCase(kind CausalKind, t, d int, rng *rand.Rand) causalCase {
	c := causalCase{kind: kind, t: t, d: d, lda: t + 3, ldb: d + 2, ldc: max(t, d) + 3}
	if kind == CausalABt {
		c.lda = d + 1
	}
	val := func() uint16 { return precision.ToBF16(float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(7)-3))) }
	c.a, c.b = make([]uint16, t*c.lda), make([]uint16, t*c.ldb)
	for i := range t {
		for j := range c.lda {
			if kind == CausalABt && j < d || kind != CausalABt && j <= i {
				c.a[i*c.lda+j] = val()
			} else if kind != CausalABt && j < t {
				continue // L's upper triangle: zero
			} else {
				c.a[i*c.lda+j] = 0x7FC0 // past the rows: NaN, never read
			}
		}
		for j := range c.ldb {
			c.b[i*c.ldb+j] = 0x7FC0
			if j < d {
				c.b[i*c.ldb+j] = val()
			}
		}
	}
	return c
}

// cols is C's width: t for the scores, d otherwise.
func (c causalCase) cols() int {
	if c.kind == CausalABt {
		return c.t
	}
	return c.d
}

// run computes the product on ck into a C of sentinels (rows of ABt in
// blocks of blk rows, 0 for one call).
func (c causalCase) run(ck CausalKernel, blk int) []float32 {
	out := make([]float32, c.t*c.ldc)
	for i := range out {
		out[i] = -7
	}
	switch c.kind {
	case CausalABt:
		if blk == 0 {
			blk = c.t
		}
		for r0 := 0; r0 < c.t; r0 += blk {
			r1 := min(r0+blk, c.t)
			ck.LowerABt(r0, r1, c.d, c.a[r0*c.lda:], c.lda, c.b, c.ldb, out[r0*c.ldc:], c.ldc)
		}
	case CausalLB:
		ck.LowerLB(c.t, c.d, c.a, c.lda, c.b, c.ldb, out, c.ldc)
	case CausalLtB:
		ck.LowerLtB(c.t, c.d, c.a, c.lda, c.b, c.ldb, out, c.ldc)
	}
	return out
}

// term is the product's p-th term of C[i][j], A's and B's values.
func (c causalCase) term(i, j, p int) (float32, float32) {
	at := func(x []uint16, ld, r, k int) float32 { return precision.FromBF16(x[r*ld+k]) }
	switch c.kind {
	case CausalABt:
		return at(c.a, c.lda, i, p), at(c.b, c.ldb, j, p)
	case CausalLB:
		return at(c.a, c.lda, i, p), at(c.b, c.ldb, p, j)
	}
	return at(c.a, c.lda, p, i), at(c.b, c.ldb, p, j)
}

// needed reports whether C[i][j] is defined: on and below the diagonal
// for the scores, every element otherwise.
func (c causalCase) needed(i, j int) bool { return c.kind != CausalABt || j <= i }

// contract is C[i][j] as the VDPBF16PS kernel computes it (the pairs of
// i's row panel of CausalRowPanel rows, from +0, each the instruction's
// two FMAs: odd depth first; depths past the stored ones are zero).
func (c causalCase) contract(i, j int) float32 {
	i0 := i / CausalRowPanel * CausalRowPanel
	rows := min(CausalRowPanel, c.t-i0)
	depth := c.d // ABt's k
	if c.kind != CausalABt {
		depth = c.t
	}
	kp := (depth + 1) / 2 * 2
	d0, d1 := 0, depth
	switch c.kind {
	case CausalLB:
		d1 = i0 + rows
	case CausalLtB:
		d0 = i0
	}
	d1 = min((d1+1)/2*2, kp)
	v := float32(0)
	for p := d0; p < d1; p += 2 {
		var a1, b1 float32
		if p+1 < depth {
			a1, b1 = c.term(i, j, p+1)
		}
		a0, b0 := c.term(i, j, p)
		v = fmaFTZ(a1, b1, v)
		v = fmaFTZ(a0, b0, v)
	}
	return v
}

// definition is C[i][j] in float64 by the product's definition, and the
// sum of its terms' magnitudes.
func (c causalCase) definition(i, j int) (s, mag float64) {
	lo, hi := 0, c.d
	switch c.kind {
	case CausalLB:
		hi = i + 1
	case CausalLtB:
		lo, hi = i, c.t
	}
	for p := lo; p < hi; p++ {
		a, b := c.term(i, j, p)
		s += float64(a) * float64(b)
		mag += math.Abs(float64(a) * float64(b))
	}
	return s, mag
}

// TestCausalProducts runs the three causal products on every path (the
// emulated VDPBF16PS kernel with and without its in-place tile, the real
// one where the CPU has it, widen) over item sizes around the row panel
// and the kernel's columns: each defined element within float32 rounding
// of the float64 definition; on the kernel paths bit for bit the kernel's
// contract (so reading A in place or packed gives the same bits), on
// widen bit for bit sgemm's float32 products; the scores' rows in blocks
// of the row panel the whole call's bits; nothing written past a row's
// column panel or outside C's rows.
func TestCausalProducts(t *testing.T) {
	packed := emuDotKernel()
	packed.inPlace = nil
	inPlace := emuDotKernel()
	paths := []struct {
		name string
		ck   CausalKernel
	}{{"widen", CausalKernel{}}, {"emu-packed", CausalKernel{packed}}, {"emu-in-place", CausalKernel{inPlace}}}
	if k := dotKernel(); k != nil {
		paths = append(paths, struct {
			name string
			ck   CausalKernel
		}{"avx512bf16", CausalKernel{k}})
	}
	rng := rand.New(rand.NewPCG(6, 7))
	for _, kind := range []CausalKind{CausalABt, CausalLB, CausalLtB} {
		for _, size := range [][2]int{{1, 1}, {2, 3}, {5, 2}, {12, 32}, {13, 7}, {24, 33}, {31, 32}, {64, 32}, {70, 16}} {
			c := newCausalCase(kind, size[0], size[1], rng)
			for _, p := range paths {
				name := fmt.Sprintf("%v/t=%d,d=%d/%s", kind, c.t, c.d, p.name)
				got := c.run(p.ck, 0)
				var widened []float32
				if p.ck.k == nil {
					widened = c.widened()
				}
				for i := range c.t {
					for j := range c.ldc {
						g := got[i*c.ldc+j]
						if j >= c.cols() || !c.needed(i, j) {
							past := j >= c.cols() || p.ck.k != nil && j >= roundUpTo(i/CausalRowPanel*CausalRowPanel+CausalRowPanel, dotNR)
							if past && g != -7 {
								t.Fatalf("%s: C[%d][%d] = %v written past its row's panels", name, i, j, g)
							}
							continue
						}
						s, mag := c.definition(i, j)
						if math.Abs(float64(g)-s) > 1e-6*mag+1e-30 {
							t.Fatalf("%s: C[%d][%d] = %v, definition %v", name, i, j, g, s)
						}
						want := c.contract(i, j)
						if widened != nil {
							want = widened[i*c.ldc+j]
						}
						if !sameBits(g, want) {
							t.Fatalf("%s: C[%d][%d] = %v (%#x), want %v (%#x)", name, i, j, g, math.Float32bits(g), want, math.Float32bits(want))
						}
					}
				}
				if kind == CausalABt {
					blocks := c.run(p.ck, CausalRowPanel)
					for i := range c.t {
						for j := 0; j <= i; j++ {
							if !sameBits(blocks[i*c.ldc+j], got[i*c.ldc+j]) {
								t.Fatalf("%s: rows in blocks: C[%d][%d] = %v, the whole call %v", name, i, j, blocks[i*c.ldc+j], got[i*c.ldc+j])
							}
						}
					}
				}
			}
		}
	}
}

// widened is the product by sgemm's causal products on the operands
// widened, into C of sentinels.
func (c causalCase) widened() []float32 {
	a, b := make([]float32, len(c.a)), make([]float32, len(c.b))
	precision.DecodeBF16(a, c.a)
	precision.DecodeBF16(b, c.b)
	out := make([]float32, c.t*c.ldc)
	for i := range out {
		out[i] = -7
	}
	switch c.kind {
	case CausalABt:
		sgemm.LowerABt(0, c.t, c.d, a, c.lda, b, c.ldb, out, c.ldc)
	case CausalLB:
		sgemm.LowerLB(0, c.t, c.d, a, c.lda, b, c.ldb, out, c.ldc)
	case CausalLtB:
		sgemm.LowerLtB(c.t, c.d, a, c.lda, b, c.ldb, out, c.ldc)
	}
	return out
}

func roundUpTo(x, m int) int { return (x + m - 1) / m * m }

// TestCausalUpperTriangleRead: LB and LtB read L's upper triangle only as
// far as the zeros they are told are there (a row panel's pairs), so a
// nonzero there shows in C: the negative control of the products'
// contract that L is zero above its diagonal.
func TestCausalUpperTriangleRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	c := newCausalCase(CausalLB, 24, 32, rng)
	ck := CausalKernel{emuDotKernel()}
	clean := c.run(ck, 0)
	c.a[0*c.lda+1] = precision.ToBF16(1) // above the diagonal, within row 0's panel
	dirty := c.run(ck, 0)
	if sameBits(dirty[0], clean[0]) {
		t.Fatal("a nonzero above L's diagonal inside a row panel changed nothing: the panel's depth is not what the contract says")
	}
}

// TestCausalForCalibration: a causal product takes the path its
// calibration times faster (within the margin, widen), a forced path
// overrides it, and CausalPath names what ran.
func TestCausalForCalibration(t *testing.T) {
	cases := []struct {
		times map[string]float64
		want  string
	}{
		{map[string]float64{"widen": 2, "avx512bf16": 1}, "avx512bf16"},
		{map[string]float64{"widen": 1, "avx512bf16": 2}, "widen"},
		{map[string]float64{"widen": 1, "avx512bf16": 0.99}, "widen"}, // within the margin
	}
	for _, tc := range cases {
		withPaths(t, []pathImpl{{"widen", nil}, {"avx512bf16", emuDotKernel()}}, timesOf(tc.times))
		ck := CausalFor(CausalLB, 16, 8)
		if got := ck.Path(); got != strings.Replace(tc.want, "avx512bf16", "emu-avx512bf16", 1) {
			t.Errorf("times %v: path %s, want %s", tc.times, got, tc.want)
		}
		if cs := CausalChoices(); len(cs) != 1 || cs[0].Path != tc.want || cs[0].T != 16 || cs[0].D != 8 {
			t.Errorf("times %v: choices %v", tc.times, cs)
		}
		if p := CausalPath(); !strings.Contains(p, tc.want+" ×1") {
			t.Errorf("times %v: CausalPath() = %q", tc.times, p)
		}
		for _, forced := range []string{"widen", "avx512bf16"} {
			if err := SetPath(forced); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"widen": "widen", "avx512bf16": "emu-avx512bf16"}[forced]
			if got := CausalFor(CausalLB, 16, 8).Path(); got != want {
				t.Errorf("forced %s: path %s", forced, got)
			}
			if p := CausalPath(); p != forced+" (forced)" {
				t.Errorf("forced %s: CausalPath() = %q", forced, p)
			}
		}
		restorePath(t)
	}
	withPaths(t, []pathImpl{{"widen", nil}}, nil)
	if got := CausalFor(CausalABt, 64, 32).Path(); got != "widen" || CausalPath() != "widen" {
		t.Errorf("no VDPBF16PS: path %s, CausalPath %q", got, CausalPath())
	}
}
