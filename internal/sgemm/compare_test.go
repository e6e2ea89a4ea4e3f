package sgemm

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCompare prints, for each GPT shape and implementation, the best
// GFLOP/s over interleaved repetitions at 1 and 2 threads, the median over
// shapes and the ratio to the last implementation (OpenBLAS under the
// openblas tag). The best of many runs is robust to other load on a shared
// machine. It runs only with SGEMM_COMPARE=1 (a measurement, not a test);
// SGEMM_SHAPES=regexp selects shapes by name:
//
//	SGEMM_COMPARE=1 go test -tags openblas -run Compare -v ./internal/sgemm/
func TestCompare(t *testing.T) {
	if os.Getenv("SGEMM_COMPARE") == "" {
		t.Skip("measurement; set SGEMM_COMPARE=1 to run")
	}
	reps := 30
	shapes := gptShapes
	if re := os.Getenv("SGEMM_SHAPES"); re != "" {
		shapes = nil
		for _, s := range gptShapes {
			if ok, _ := regexp.MatchString(re, s.what); ok {
				shapes = append(shapes, s)
			}
		}
	}
	impls := benchImpls
	if kernels[0] != goKernel {
		go1 := benchImpl{name: "ours-go", impl: kernelImpl{kern: goKernel}}
		impls = append([]benchImpl{impls[0], go1}, impls[1:]...)
	}
	var out strings.Builder
	for _, threads := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(threads)
		for _, im := range impls {
			if im.setThreads != nil {
				im.setThreads(threads)
			}
		}
		fmt.Fprintf(&out, "threads=%d\n%-26s", threads, "shape")
		for _, im := range impls {
			fmt.Fprintf(&out, " %9s", im.name)
		}
		out.WriteString("\n")
		gf := make([][]float64, len(impls))
		for _, s := range shapes {
			o := newOperands(1, shape{s.m, s.n, s.k}, s.aT, s.bT, 1, 0, 0)
			tA, tB := blasTrans(s.aT), blasTrans(s.bT)
			flops := 2 * float64(s.m) * float64(s.n) * float64(s.k)
			inner := max(1, int(2e7/flops)) // calls per timing, ~0.2 ms at 100 GFLOP/s
			best := make([]time.Duration, len(impls))
			for r := 0; r < reps; r++ {
				for i, im := range impls {
					if (im.name == "gonum" || im.name == "ours-go") && r >= 5 {
						continue // slow and not the target; a few runs suffice
					}
					start := time.Now()
					for range inner {
						im.impl.Sgemm(tA, tB, o.m, o.n, o.k, 1, o.a, o.lda, o.b, o.ldb, 0, o.c, o.ldc)
					}
					if d := time.Since(start) / time.Duration(inner); best[i] == 0 || d < best[i] {
						best[i] = d
					}
				}
			}
			fmt.Fprintf(&out, "%-26s", fmt.Sprintf("%s %dx%dx%d %s%s", s.what, s.m, s.n, s.k, transName(s.aT), transName(s.bT)))
			for i := range impls {
				g := flops / float64(best[i].Nanoseconds())
				gf[i] = append(gf[i], g)
				fmt.Fprintf(&out, " %9.1f", g)
			}
			out.WriteString("\n")
		}
		fmt.Fprintf(&out, "%-26s", "median")
		for i := range impls {
			fmt.Fprintf(&out, " %9.1f", median(gf[i]))
		}
		out.WriteString("\n")
		last := len(impls) - 1
		for i := range impls[:last] {
			ratios := make([]float64, len(shapes))
			for j := range ratios {
				ratios[j] = gf[i][j] / gf[last][j]
			}
			fmt.Fprintf(&out, "%s/%s: median of per-shape ratios %.2f, ratio of medians %.2f\n",
				impls[i].name, impls[last].name, median(ratios), median(gf[i])/median(gf[last]))
		}
		runtime.GOMAXPROCS(prev)
	}
	t.Log("\n" + out.String())
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
