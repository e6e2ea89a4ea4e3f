package gptcheck

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
	"gorgonia.org/gorgonia"

	"gptlab/internal/sgemm"
	"gptlab/models"
)

// call is the shape of one Sgemm call.
type call struct {
	tA, tB  blas.Transpose
	m, n, k int
}

// recorder is gonum's BLAS with Sgemm from inner, counting calls by shape
// (the executor makes calls from several goroutines at once).
type recorder struct {
	gonum.Implementation
	inner blas.Float32
	mu    *sync.Mutex
	calls map[call]int
}

func (r recorder) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.mu.Lock()
	r.calls[call{tA, tB, m, n, k}]++
	r.mu.Unlock()
	r.inner.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// trainLosses runs steps training steps of preset on the embedded corpus
// with impl as the BLAS and returns the losses and the mean step time.
func trainLosses(t *testing.T, preset string, impl gorgonia.BLAS, steps int) ([]float32, time.Duration) {
	t.Helper()
	gorgonia.Use(impl)
	defer gorgonia.Use(gonum.Implementation{})
	mc, err := models.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	data, err := models.DefaultCorpus(1, mc.Block)
	if err != nil {
		t.Fatalf("DefaultCorpus: %v", err)
	}
	tr, err := models.NewTrainer(models.TrainConfig{Model: mc, Iters: 100, LR: 1e-3, Warmup: 0, EvalBatches: 1, Seed: 1}, data)
	if err != nil {
		t.Fatalf("NewTrainer: %v", err)
	}
	defer tr.Close()
	var losses []float32
	var total time.Duration
	for i := 0; i < steps; i++ {
		start := time.Now()
		l, err := tr.TrainStep()
		if err != nil {
			t.Fatalf("TrainStep: %v", err)
		}
		if i > 0 { // the first step warms caches and pools
			total += time.Since(start)
		}
		losses = append(losses, l)
	}
	return losses, total / time.Duration(max(steps-1, 1))
}

// TestGPTOnSgemm trains the small GPT for a few steps on gonum's BLAS and
// on package sgemm: the losses must agree to float32 rounding, and the
// run must go through sgemm's Sgemm.
func TestGPTOnSgemm(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a GPT; skipped in -short")
	}
	const steps = 3
	want, _ := trainLosses(t, "small", gonum.Implementation{}, steps)
	rec := recorder{inner: sgemm.Implementation{}, mu: new(sync.Mutex), calls: map[call]int{}}
	got, _ := trainLosses(t, "small", rec, steps)
	if len(rec.calls) == 0 {
		t.Fatalf("training made no Sgemm call through the installed BLAS")
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Abs(float64(want[i])) {
			t.Errorf("loss at step %d = %v on sgemm, %v on gonum (|diff| %.3g > 1e-4 relative)", i, got[i], want[i], d)
		}
	}
}

// TestGPTShapesAndTime logs the Sgemm shapes of one baby training step and
// the step time on gonum, sgemm and (with the openblas tag) OpenBLAS, at
// GOMAXPROCS 1 and 2. A measurement: it runs only with SGEMM_COMPARE=1:
//
//	SGEMM_COMPARE=1 go test -tags openblas -run GPTShapes -v ./internal/sgemm/gptcheck/
func TestGPTShapesAndTime(t *testing.T) {
	if os.Getenv("SGEMM_COMPARE") == "" {
		t.Skip("measurement; set SGEMM_COMPARE=1 to run")
	}
	rec := recorder{inner: sgemm.Implementation{}, mu: new(sync.Mutex), calls: map[call]int{}}
	trainLosses(t, "baby", rec, 1)
	var lines []string
	var flops float64
	for c, n := range rec.calls {
		f := 2 * float64(c.m) * float64(c.n) * float64(c.k) * float64(n)
		flops += f
		lines = append(lines, fmt.Sprintf("%c%c m=%d n=%d k=%d  calls=%d  MFLOP=%.1f", c.tA, c.tB, c.m, c.n, c.k, n, f/1e6))
	}
	sort.Strings(lines)
	t.Logf("Sgemm calls of one baby training step (%.0f MFLOP in all):\n%s", flops/1e6, strings.Join(lines, "\n"))
	const steps = 6
	impls := append([]namedBLAS{{"gonum", gonum.Implementation{}, nil}, {"sgemm", sgemm.Implementation{}, nil}}, extraBLAS...)
	var report []string
	for _, th := range []int{1, 2} {
		prevG := runtime.GOMAXPROCS(th)
		prev := sgemm.SetThreads(th)
		line := fmt.Sprintf("GOMAXPROCS=%d:", th)
		var base time.Duration
		for i, im := range impls {
			if im.setThreads != nil {
				im.setThreads(th)
			}
			_, d := trainLosses(t, "baby", im.impl, steps)
			if i == 0 {
				base = d
			}
			line += fmt.Sprintf("  %s %v/step (%.2fx gonum)", im.name, d.Round(time.Millisecond), float64(base)/float64(d))
		}
		sgemm.SetThreads(prev)
		runtime.GOMAXPROCS(prevG)
		report = append(report, line)
	}
	t.Log("baby training step (forward, backward, AdamW), mean of 5 after a warm-up step:\n" + strings.Join(report, "\n"))
}

// namedBLAS is a BLAS under comparison; setThreads, if not nil, sets its
// thread count.
type namedBLAS struct {
	name       string
	impl       gorgonia.BLAS
	setThreads func(int)
}

// extraBLAS holds BLAS added by build tags (OpenBLAS).
var extraBLAS []namedBLAS
