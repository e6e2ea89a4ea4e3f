package qgemm

import (
	"math"
	"math/rand/v2"
	"testing"

	"gptlab/precision"
)

// The Go emulations of the assembly kernels' contracts, instruction by
// instruction at the level that matters (which operand is unsigned, where
// a sum saturates), with the tile shapes of each family. They test the
// driver and the tricks on any machine; the kernels this CPU has are
// checked bitwise against them.

// Each model of a dword group gives the int32 added to an accumulator
// for four activation bytes a and four codes w (runTile's g).

// vpdpbusd: u8·s8 products summed into the dword, as VPDPBUSD.
func vpdpbusd(a []byte, w []int8) int32 {
	var s int32
	for d := range 4 {
		s += int32(a[d]) * int32(w[d])
	}
	return s
}

// sat16 saturates to int16, as VPMADDUBSW's pair sums.
func sat16(v int32) int32 { return min(max(v, math.MinInt16), math.MaxInt16) }

// vpsignb is VPSIGNB's lane: x negated, zeroed or kept as s is <0, 0, >0
// (int8 wrap-around: -(-128) is -128).
func vpsignb(x, s int8) int8 {
	switch {
	case s < 0:
		return -x
	case s == 0:
		return 0
	}
	return x
}

// avx2Group: VPSIGNB a,a (|a|, read as u8 by VPMADDUBSW), VPSIGNB w,a,
// VPMADDUBSW (saturating int16 pair sums), VPMADDWD with ones.
func avx2Group(a []byte, w []int8) int32 {
	var p [2]int32
	for h := range 2 {
		for d := 2 * h; d < 2*h+2; d++ {
			ax := int8(a[d])
			p[h] += int32(uint8(vpsignb(ax, ax))) * int32(vpsignb(w[d], ax))
		}
		p[h] = sat16(p[h])
	}
	return p[0] + p[1]
}

// naiveGroup is the negative control of the AVX2 trick: VPMADDUBSW fed
// the unsigned code+128 directly, whose pair sums can exceed int16.
func naiveGroup(a []byte, w []int8) int32 {
	var p [2]int32
	for h := range 2 {
		for d := 2 * h; d < 2*h+2; d++ {
			p[h] += int32(a[d]^0x80) * int32(w[d])
		}
		p[h] = sat16(p[h]) - 128*(int32(w[2*h])+int32(w[2*h+1]))
	}
	return p[0] + p[1]
}

// signedGroup is the plain s8·s8 group: runTile with it is the contract
// tileGo implements another way.
func signedGroup(a []byte, w []int8) int32 {
	var s int32
	for d := range 4 {
		s += int32(int8(a[d])) * int32(w[d])
	}
	return s
}

// emulations are the Go models of the assembly kernels, with the tile
// shapes of asm/main.go's families.
var emulations = []*kernel{
	{name: "avx512vnni", unsigned: true, shapes: [2]tileShape{{4, 4, 8}, {3, 4, 8}},
		run: func(t *tile) { runTile(t, true, vpdpbusd) }, quant: quantRowGo},
	{name: "avxvnni", unsigned: true, shapes: [2]tileShape{{4, 1, 4}, {3, 1, 3}},
		run: func(t *tile) { runTile(t, true, vpdpbusd) }, quant: quantRowGo},
	{name: "avx2", shapes: [2]tileShape{{4, 1, 4}, {2, 1, 2}},
		run: func(t *tile) { runTile(t, false, avx2Group) }, quant: quantRowGo},
	{name: "go", shapes: [2]tileShape{{4, 2, 4}, {4, 2, 4}},
		run: func(t *tile) { runTile(t, false, signedGroup) }, quant: quantRowGo},
}

func emulation(name string) *kernel {
	for _, k := range emulations {
		if k.name == name {
			return k
		}
	}
	return nil
}

// TestEmulations checks each emulation against the integer reference on
// every shape and scheme, and each kernel this CPU has against its
// emulation, bitwise.
func TestEmulations(t *testing.T) {
	for _, e := range emulations {
		for _, sc := range schemes {
			for _, sh := range shapes {
				p := newProblem(t, sh, sc, 7)
				y := make([]float32, sh.m*sh.n)
				dynamic(e, y, p.x, sh.m, p.w)
				if i := firstDiff(y, p.intRef()); i >= 0 {
					t.Fatalf("emulated %s %v %v: y[%d] differs from the integer reference", e.name, sc, sh, i)
				}
			}
		}
	}
	tested := 0
	for _, k := range kernels {
		e := emulation(k.name)
		if e == nil {
			continue
		}
		tested++
		if k.shapes != e.shapes || k.unsigned != e.unsigned {
			t.Errorf("%s: kernel tiles %v unsigned %v, emulation %v %v", k.name, k.shapes, k.unsigned, e.shapes, e.unsigned)
		}
		for _, sc := range schemes {
			for _, sh := range shapes {
				p := newProblem(t, sh, sc, 8)
				got, want := make([]float32, sh.m*sh.n), make([]float32, sh.m*sh.n)
				dynamic(k, got, p.x, sh.m, p.w)
				dynamic(e, want, p.x, sh.m, p.w)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("%s %v %v: y[%d] = %g, emulation %g", k.name, sc, sh, i, got[i], want[i])
				}
			}
		}
	}
	t.Logf("kernels checked against their emulation: %d (%v)", tested, Paths())
}

func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestNegativeControls: a damaged correction and the naive u8 use of
// VPMADDUBSW are caught by the checks above.
func TestNegativeControls(t *testing.T) {
	p := newProblem(t, shape{4, 64, 128}, precision.Int8PerChannel, 9)
	want := p.intRef()
	for _, k := range append([]*kernel{emulations[0]}, kernels...) {
		if !k.unsigned {
			continue
		}
		damaged := *p.w
		damaged.corr = append([]int32(nil), p.w.corr...)
		damaged.corr[5]++
		y := make([]float32, 4*64)
		dynamic(k, y, p.x, 4, &damaged)
		if firstDiff(y, want) < 0 {
			t.Errorf("%s: a damaged correction went unnoticed", k.name)
		}
	}
	// Codes at full scale: |x| = 127 everywhere, so (x+128)·w pair sums
	// reach 2·255·127 > 32767.
	x := make([]float32, 4*128)
	for i := range x {
		x[i] = 1
	}
	naive := &kernel{name: "naive", unsigned: true, shapes: [2]tileShape{{4, 1, 4}, {2, 1, 2}},
		run: func(t *tile) { runTile(t, true, naiveGroup) }, quant: quantRowGo}
	q := make([]int8, 64*128)
	for i := range q {
		q[i] = 127
	}
	w, err := NewWeights(64, 128, q, make([]float32, 64), precision.Int8PerChannel)
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.scales {
		w.scales[i] = 1
	}
	yn, ye := make([]float32, 4*64), make([]float32, 4*64)
	dynamic(naive, yn, x, 4, w)
	dynamic(emulation("avx2"), ye, x, 4, w)
	exact := float32(128*127*127) * (float32(1) / 127) // acc·sw·sx
	if ye[0] != exact || yn[0] == ye[0] {
		t.Errorf("sign trick %g (want %g), naive u8 %g (saturates, want different)", ye[0], exact, yn[0])
	}
}

// TestQuantRowBitwise: every kernel's activation quantizer gives
// precision.QuantizeInt8Vector's codes and scale bitwise, on lengths that
// exercise the vector loop and the Go tail, halfway points, tiny,
// subnormal and non-finite values.
func TestQuantRowBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 11))
	rows := [][]float32{}
	for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 32, 33, 100, 128, 2048} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		rows = append(rows, x)
		// Halfway points of a power-of-two scale: max 127·2^-4.
		h := make([]float32, n)
		for i := range h {
			h[i] = (float32(i%254-127) + 0.5) / 16
		}
		h[0] = 127.0 / 16
		rows = append(rows, h)
		tiny := make([]float32, n)
		for i := range tiny {
			tiny[i] = float32(i%9-4) * math.SmallestNonzeroFloat32 * float32(1+i%3)
		}
		rows = append(rows, tiny, make([]float32, n))
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			for _, at := range []int{0, n - 1} {
				b := append([]float32(nil), x...)
				b[at] = float32(bad)
				rows = append(rows, b)
			}
		}
	}
	for _, k := range append(kernels, emulations...) {
		for _, x := range rows {
			kp := (len(x) + 31) / 32 * 32
			got := make([]byte, kp)
			want := make([]int8, len(x))
			s := k.quant(got, x, k.unsigned)
			ws := precision.QuantizeInt8Vector(want, x)
			if math.Float32bits(s) != math.Float32bits(ws) && !(math.IsNaN(float64(s)) && math.IsNaN(float64(ws))) {
				t.Fatalf("%s len %d: scale %g, want %g", k.name, len(x), s, ws)
			}
			for i := range kp {
				w := int8(0)
				if i < len(x) {
					w = want[i]
				}
				g := int8(got[i])
				if k.unsigned {
					g = int8(got[i] ^ 0x80)
				}
				if g != w {
					t.Fatalf("%s len %d: code %d = %d (x %g), want %d", k.name, len(x), i, g, x[min(i, len(x)-1)], w)
				}
			}
		}
	}
}

// gemvEmu is the contract of the GEMV kernels (asm/main.go genGemv): four
// partial sums per column by float32 FMA in depth order, added as
// (s0+s1)+(s2+s3), scaled into the result by FMA, block after block.
func gemvEmu(y, x []float32, w *Weights, p0, nv int) {
	fma := func(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }
	kqb := w.bk / kGroup
	for v := range nv {
		p := p0 + v
		b := w.codes[p*w.kp*panelW:]
		for c := range panelW {
			var acc float32
			for blk := range w.nb {
				var s [4]float32
				for g := blk * kqb; g < (blk+1)*kqb; g++ {
					for d := range kGroup {
						s[d] = fma(x[g*kGroup+d], float32(b[(g*panelW+c)*kGroup+d]), s[d])
					}
				}
				acc = fma(float32(float32(s[0]+s[1])+float32(s[2]+s[3])), w.scales[(blk*w.np+p)*panelW+c], acc)
			}
			y[v*panelW+c] = acc
		}
	}
}

// TestWeightOnlyKernels checks each assembly weight-only kernel bitwise:
// the dequantization against dequantGo (one rounding per value), the GEMV
// against gemvEmu. (float32(math.FMA) of float32 operands rounds twice;
// it could differ from a float32 FMA only on a sum needing more than 53
// bits that lands on a float32 tie, which these inputs do not.)
func TestWeightOnlyKernels(t *testing.T) {
	for _, k := range kernels {
		if k == goKernel {
			continue
		}
		for _, sc := range schemes {
			for _, sh := range []shape{{1, 48, 96}, {1, 130, 250}, {1, 64, 2048}} {
				p := newProblem(t, sh, sc, 13)
				w := p.w
				xp := make([]float32, w.kp)
				copy(xp, p.x)
				for p0 := 0; p0 < w.np; p0 += k.gemvNV {
					nv := min(k.gemvNV, w.np-p0)
					got, want := make([]float32, nv*panelW), make([]float32, nv*panelW)
					k.gemv(got, xp, w, p0, nv)
					gemvEmu(want, xp, w, p0, nv)
					if i := firstDiff(got, want); i >= 0 {
						t.Fatalf("%s gemv %v %v panel %d: y[%d] = %g, emulation %g", k.name, sc, sh, p0, i, got[i], want[i])
					}
				}
				const ldd = 40
				for pn := range w.np {
					// The whole depth, and ranges from a block ending
					// within one (the assembly's groups, then Go's rest).
					for _, r := range [][2]int{{0, w.kp}, {32, w.kp - 3}, {0, 5}, {64, 64 + 37}} {
						k0, k1 := r[0], min(r[1], w.kp)
						if k0 >= k1 {
							continue
						}
						got, want := make([]float32, w.kp*ldd), make([]float32, w.kp*ldd)
						k.dequant(got[3:], ldd, w, pn, k0, k1)
						dequantGo(want[3:], ldd, w, pn, k0, k1)
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s dequant %v %v panel %d depth [%d, %d): [%d] = %g, want %g", k.name, sc, sh, pn, k0, k1, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// runTile runs the tile contract, one column at a time, with g giving the int32 added to an
// accumulator for each dword group (four activation bytes, four codes);
// unsigned accumulators start at corr. The assembly kernels'
// instruction-level models run through it.
func runTile(t *tile, unsigned bool, g func(a []byte, w []int8) int32) {
	for i := range t.mr * t.nt {
		a := t.a[i*t.lda:]
		for v := range t.nv {
			b := t.b[v*t.pstr:]
			for c := range panelW {
				f := float32(0)
				for blk := range t.nb {
					var acc int32
					if unsigned {
						acc = t.corr[blk*t.bstr+v*panelW+c]
					}
					for gi := blk * t.kqb; gi < (blk+1)*t.kqb; gi++ {
						acc += g(a[gi*kGroup:gi*kGroup+kGroup], b[(gi*panelW+c)*kGroup:][:kGroup])
					}
					// The conversion keeps the compiler from fusing this
					// product with the sum (the kernels round both).
					f += float32(float32(acc) * t.sw[blk*t.bstr+v*panelW+c])
				}
				t.y[i*t.ldy+v*panelW+c] = f * t.sx[i]
			}
		}
	}
}
