package bf16gemm

import (
	"fmt"
	"math"
	"slices"
	"time"

	"gptlab/precision"
)

// Which path is fastest depends on the CPU and on the shape: VDPBF16PS
// runs 1.8x float32's FMA rate on one Zen 5 core and about half of it on
// the Xeons measured, and where the kernel is faster its packing can
// still cost more than it saves on a product of few columns. So no path
// is preferred by rule: on the first product of each shape (m, n, k, the
// transposes and the goroutines it splits over; not how the operands are
// held, so that Gemm, GemmF32 and GemmMixed agree bit for bit) every
// path this machine runs is timed on that shape, a few interleaved calls
// each on operands of the shape's size, and the shape keeps the fastest
// for the process. A shape costs a few milliseconds once (the baby GPT's
// step has about a dozen); the products' results are each path's own,
// deterministic for a given choice, and the choices are named in every
// report (Path) and listed with their times (Choices).

// shapeKey is a product's shape as calibration tells them apart. How its
// operands are held (bf16 bits or float32) is not part of it: Gemm,
// GemmF32 and GemmMixed take one path per shape, so that a product gives
// the same bits whichever way its operands come.
type shapeKey struct {
	aT, bT  bool
	m, n, k int
	threads int
}

// Choice is one shape's calibration: the time of a call on each path this
// machine runs (the best of the rounds) and the path chosen.
type Choice struct {
	ATrans, BTrans bool
	M, N, K        int
	Threads        int
	Paths          []string  // the candidates, as Paths lists them
	Seconds        []float64 // each candidate's best time per call
	Rounds         int
	Path           string // the path chosen: the shape's products take it
	chosen         int    // Path's index
}

// Rate is candidate i's GFLOP/s.
func (c Choice) Rate(i int) float64 { return 2 * float64(c.M*c.N) * float64(c.K) / c.Seconds[i] / 1e9 }

// Form is the product's form: "A·Bᵀ", "A·B", "Aᵀ·B" or "Aᵀ·Bᵀ".
func (c Choice) Form() string {
	a, b := "A", "B"
	if c.ATrans {
		a += "ᵀ"
	}
	if c.BTrans {
		b += "ᵀ"
	}
	return a + "·" + b
}

func (c Choice) String() string {
	th := "1 thread"
	if c.Threads > 1 {
		th = fmt.Sprintf("%d threads", c.Threads)
	}
	return fmt.Sprintf("%s %d×%d×%d (%s): %s", c.Form(), c.M, c.N, c.K, th, c.Path)
}

// Choices lists the shapes calibrated so far, in order of shape.
func Choices() []Choice {
	pathMu.Lock()
	defer pathMu.Unlock()
	var cs []Choice
	for _, c := range choices {
		cs = append(cs, *c)
	}
	slices.SortFunc(cs, func(a, b Choice) int {
		for _, d := range []int{b2i(a.ATrans) - b2i(b.ATrans), b2i(a.BTrans) - b2i(b.BTrans),
			a.M - b.M, a.N - b.N, a.K - b.K, a.Threads - b.Threads} {
			if d != 0 {
				return d
			}
		}
		return 0
	})
	return cs
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ResetCalibration forgets every shape's choice, the causal products' too
// (the next product of each calibrates again): for comparisons and tests.
func ResetCalibration() {
	pathMu.Lock()
	choices, causalChoices = nil, nil
	pathMu.Unlock()
}

// The calibration's rounds: at least minRounds of every candidate, more
// until calBudget is spent or maxRounds; one warm call each first.
const (
	minRounds = 3
	maxRounds = 9
	calBudget = 20 * time.Millisecond
)

// margin is how much faster than widen a hardware path must time to be
// chosen: two paths within it are the same speed to this measurement, and
// widen (float32 FMA, no bf16 contract) is then kept, so that a tie does
// not flip between runs on noise.
const margin = 0.03

// clock times a call (tests replace it to decide calibrations).
var clock = func(p pathImpl, f func()) float64 {
	t0 := time.Now()
	f()
	return time.Since(t0).Seconds()
}

// calibrate times every candidate on key's shape and returns the choice.
func calibrate(key shapeKey, cands []pathImpl) *Choice {
	c := &Choice{ATrans: key.aT, BTrans: key.bT, M: key.m, N: key.n, K: key.k, Threads: key.threads}
	for _, p := range cands {
		c.Paths = append(c.Paths, p.name)
	}
	c.Seconds, c.Rounds = timeRounds(cands, calibrationCalls(key, cands))
	c.chosen = fastest(cands, c.Seconds)
	c.Path = cands[c.chosen].name
	return c
}

// timeRounds times calls[i], candidate i's call, after one warm call each
// (panels, pools, caches): interleaved rounds, at least minRounds, more
// until calBudget is spent or maxRounds. It returns each candidate's best
// time and the rounds.
func timeRounds(cands []pathImpl, calls []func()) (best []float64, rounds int) {
	best = make([]float64, len(cands))
	for i := range best {
		best[i] = math.Inf(1)
		calls[i]()
	}
	t0 := time.Now()
	for rounds < maxRounds && (rounds < minRounds || time.Since(t0) < calBudget) {
		for i, p := range cands {
			best[i] = min(best[i], clock(p, calls[i]))
		}
		rounds++
	}
	return best, rounds
}

// fastest is the candidate chosen from their best times: the fastest
// hardware path that beats widen (candidate 0) by more than margin, else
// widen.
func fastest(cands []pathImpl, best []float64) int {
	chosen := 0
	for i := range cands {
		if cands[i].kern != nil && best[i] < (1-margin)*best[0] && best[i] < best[chosen] {
			chosen = i
		}
	}
	return chosen
}

// calibrationCalls are key's product on each candidate path, on bf16
// operands of its shape with tight strides and fixed values (normal-ish
// numbers rounded to bf16; the kernels' speed does not depend on them).
// The bf16 policy's products read most operands as bf16 bits, so that is
// how they are timed; one held as float32 adds its conversion (packed
// paths) where widen takes it as it is.
func calibrationCalls(key shapeKey, cands []pathImpl) []func() {
	seed := uint32(7)
	val := func() float32 {
		seed = seed*1664525 + 1013904223
		return float32(int32(seed>>8)-1<<23) / (1 << 23)
	}
	o := operands{aT: key.aT, bT: key.bT, m: key.m, n: key.n, k: key.k, lda: key.k, ldb: key.n, ldc: key.n}
	if key.aT {
		o.lda = key.m
	}
	if key.bT {
		o.ldb = key.k
	}
	na, nb := o.storedLen()
	a32, b32 := make([]float32, na), make([]float32, nb)
	for _, x := range [][]float32{a32, b32} {
		for i := range x {
			x[i] = val()
		}
	}
	o.a, o.b = make([]uint16, na), make([]uint16, nb)
	precision.EncodeBF16(o.a, a32)
	precision.EncodeBF16(o.b, b32)
	o.c = make([]float32, key.m*key.n)
	calls := make([]func(), len(cands))
	for i, p := range cands {
		if p.kern == nil {
			calls[i] = func() { widen(o, Operand{U16: o.a}, Operand{U16: o.b}, na, nb) }
		} else {
			calls[i] = func() { run(p.kern, o, key.threads) }
		}
	}
	return calls
}
