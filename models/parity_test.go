package models

import (
	"math"
	"path/filepath"
	"testing"

	"gptlab/internal/safetensors"
	"gptlab/internal/testutil"
)

// goldenCase is one case written by gpt_reference.py golden.
type goldenCase struct {
	params *Params
	cfg    Config
	B, T   int
	idx    []int32
	tgt    []int32
	want   map[string]safetensors.Tensor
}

func loadGolden(t testing.TB, dir string) goldenCase {
	t.Helper()
	p, err := LoadParams(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ts, _, err := safetensors.Read(filepath.Join(dir, "case.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	c := goldenCase{params: p, cfg: p.Config(), want: ts}
	idx := ts["idx"]
	c.B, c.T = idx.Shape[0], idx.Shape[1]
	c.cfg.Batch = c.B
	for _, v := range idx.Ints {
		c.idx = append(c.idx, int32(v))
	}
	for _, v := range ts["targets"].Ints {
		c.tgt = append(c.tgt, int32(v))
	}
	return c
}

// checkGolden runs one golden case: logits, loss and every gradient within
// 1e-4, and three AdamW steps within 1e-5.
func checkGolden(t *testing.T, dir string) {
	c := loadGolden(t, dir)
	m, err := NewModel(c.cfg, c.params, c.B, c.T, true)
	if err != nil {
		t.Fatal(err)
	}
	loss, err := m.Step(c.idx, c.tgt)
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(float64(loss) - float64(c.want["loss"].F32[0])); d > 1e-4 {
		t.Errorf("loss = %v, want %v (diff %g)", loss, c.want["loss"].F32[0], d)
	}
	if d := testutil.MaxAbsDiff(m.Logits(), c.want["logits"].F32); d > 1e-4 {
		t.Errorf("logits: max abs diff %g > 1e-4", d)
	}
	worst, worstName := 0.0, ""
	for _, n := range c.params.Names() {
		d := testutil.MaxAbsDiff(m.Grad(n), c.want["grad."+n].F32)
		if d > worst {
			worst, worstName = d, n
		}
		if d > 1e-4 {
			t.Errorf("grad %s: max abs diff %g > 1e-4", n, d)
		}
	}
	t.Logf("%s: loss %v, logits diff %.3g, worst grad diff %.3g (%s)", filepath.Base(dir), loss,
		testutil.MaxAbsDiff(m.Logits(), c.want["logits"].F32), worst, worstName)
}

func TestParitySharedTiny(t *testing.T) {
	checkGolden(t, filepath.Join(testutil.Shared(t), "golden", "tiny"))
}

// checkGoldenAdamW runs three AdamW steps on the case's batch and compares
// the losses and the parameters after them.
//
// The 1e-5 bound is ill-conditioned for weights whose gradient is near 0
// (so those get a documented wider bound below):
// AdamW's first step moves a weight by lr*g/(|g|+eps), eps = 1e-8, so a
// gradient of 1e-9 (float32 summation noise in a GEMM) moves it by 1e-4
// whatever its sign. On the cases here every weight stays within 1e-5
// (worst 2.8e-6); on a baby-sized case (4 layers, embd 128, batch 12) 8 of
// 0.8M weights exceed it, all with |gradient| < 5e-8, the rest within
// 8.8e-6, while its gradients agree within 5e-8.
func checkGoldenAdamW(t *testing.T, dir string) {
	c := loadGolden(t, dir)
	m, err := NewModel(c.cfg, c.params, c.B, c.T, true)
	if err != nil {
		t.Fatal(err)
	}
	opt := NewAdamW(c.params, DefaultAdamW())
	want := c.want["adamw.losses"].F32
	for k := 0; k < 3; k++ {
		loss, err := m.Step(c.idx, c.tgt)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(loss) - float64(want[k])); d > 1e-5 {
			t.Errorf("adamw loss %d = %v, want %v", k, loss, want[k])
		}
		if _, err := opt.Step(m, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	// Per weight: 1e-5 where the first gradient is at least 1e-6 (the
	// step's direction is then set by the gradient, not by rounding); where
	// it is smaller, AdamW's normalised step amplifies summation noise up
	// to lr per step, so those weights get atol 3*lr and are counted.
	const lr, tight, small = 1e-3, 1e-5, 1e-6
	worst, worstName, loose, worstLoose := 0.0, "", 0, 0.0
	for _, n := range c.params.Names() {
		got, want, g0 := c.params.Slice(n), c.want["after."+n].F32, c.want["grad."+n].F32
		for i := range got {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			tol := tight
			if math.Abs(float64(g0[i])) < small {
				tol = 3 * lr
				loose++
				worstLoose = max(worstLoose, d)
			} else if d > worst {
				worst, worstName = d, n
			}
			if d > tol {
				t.Errorf("after 3 AdamW steps, %s[%d] (first gradient %.3g): diff %g > %g", n, i, g0[i], d, tol)
				break
			}
		}
	}
	t.Logf("%s: %d weights with |first gradient| < %g held to 3*lr (worst %.3g)", filepath.Base(dir), loose, small, worstLoose)
	t.Logf("%s: after 3 AdamW steps, worst parameter diff %.3g (%s)", filepath.Base(dir), worst, worstName)
}

func TestParitySharedTinyAdamW(t *testing.T) {
	checkGoldenAdamW(t, filepath.Join(testutil.Shared(t), "golden", "tiny"))
}

// TestParityTestdata runs every case under testdata/golden (made with
// gpt_reference.py golden; see testdata/golden/README).
func TestParityTestdata(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*", "case.safetensors"))
	if err != nil || len(dirs) < 3 {
		t.Fatalf("found %d golden cases (%v), want at least 3", len(dirs), err)
	}
	for _, c := range dirs {
		dir := filepath.Dir(c)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			checkGolden(t, dir)
			checkGoldenAdamW(t, dir)
		})
	}
}
