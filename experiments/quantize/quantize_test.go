package quantize

import (
	"errors"
	"math"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/internal/testutil"
	"gptlab/models"
	"gptlab/precision"
)

// TestQuickChecksHold: the quick lab (PyTorch aside, so the test does not
// depend on torch) passes its checks but the timed ones, and reports the
// issue's metrics under their names, with values that follow from what it
// measured: the int8 weights are the codes and scales, the perplexities
// close.
func TestQuickChecksHold(t *testing.T) {
	testutil.SkipEmulated(t, "the quick lab on baby runs natively; emulated, TestLargeRowsAndBadSettings runs it end to end on tiny")
	r, err := labtest.Run(Lab, true, "torch=false", "greedy-tokens=40")
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	m := map[string]float64{}
	for _, k := range r.Metrics.Keys() {
		v, _ := r.Metrics.Get(k)
		switch x := v.(type) {
		case float64:
			m[k] = x
		case int64:
			m[k] = float64(x)
		case int:
			m[k] = float64(x)
		}
	}
	for _, k := range []string{"linear_weight_bytes_f32", "linear_weight_bytes_int8", "val_ppl_f32", "val_ppl_int8", "mean_kld",
		"top1_agreement", "m1_latency_ratio_int8_vs_f32", "m64_latency_ratio_int8_vs_f32"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metric %s missing (have %v)", k, r.Metrics.Keys())
		}
	}
	// baby: 4 layers of 12·C² weights, C = 128; per channel 4·C + 4·C + 4·C + C scales... each row one scale.
	C, L := 128.0, 4.0
	if want := 4 * 12 * C * C * L; m["linear_weight_bytes_f32"] != want {
		t.Errorf("linear_weight_bytes_f32 = %v, want %v", m["linear_weight_bytes_f32"], want)
	}
	if want := 12*C*C*L + 4*(3*C+C+4*C+C)*L; m["linear_weight_bytes_int8"] != want {
		t.Errorf("linear_weight_bytes_int8 = %v, want %v (codes and one scale a row)", m["linear_weight_bytes_int8"], want)
	}
	if d := math.Abs(m["val_ppl_int8"]/m["val_ppl_f32"] - 1); d > 0.01 || m["val_ppl_f32"] < 1 {
		t.Errorf("perplexities %v and %v", m["val_ppl_f32"], m["val_ppl_int8"])
	}
	if _, ok := m["m1_latency_ratio_int8_vs_f32_large"]; ok {
		t.Error("quick reports the large config's rows")
	}
}

// TestLargeRowsAndBadSettings: the large config's latency rows appear
// when asked for (a small stand-in for speed), and bad settings are
// usage errors naming the key.
func TestLargeRowsAndBadSettings(t *testing.T) {
	sets := []string{"torch=false", "greedy-tokens=10", "iters=5", "eval-batches=1", "large=true", "large-embd=64", "large-layers=1"}
	if testutil.Trimmed() { // emulated -short: the tiny model (natively baby)
		sets = append(sets, "config=tiny")
	}
	r, err := labtest.Run(Lab, true, sets...)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"m1_latency_ratio_int8_vs_f32_large", "m64_latency_ratio_int8_vs_f32_large"} {
		if !r.Metrics.Has(k) {
			t.Errorf("metric %s missing", k)
		}
	}
	for _, sets := range [][]string{{"runs=50"}, {"threads=0"}, {"eval-batches=0"}, {"large=true", "large-embd=30"}, {"config=huge"}} {
		cfg, err := Lab.Config(true, sets)
		if err == nil {
			_, err = Lab.Run(t.Context(), cfg, lab.Options{Seed: 1})
		}
		if !errors.Is(err, lab.ErrUsage) {
			t.Errorf("--set %v: %v, want a usage error", sets, err)
		}
	}
}

// TestOutlierCost: one injected outlier lowers the SQNR of the rest of
// its channel, per channel, by more than 10 dB, and per block of 32 by
// less; without it both schemes quantize the channel to over 35 dB.
func TestOutlierCost(t *testing.T) {
	cfg, err := models.Preset("baby")
	if err != nil {
		t.Fatal(err)
	}
	ql := &quantizeLab{f32: models.NewParams(cfg, 1)}
	o := ql.outlier()
	ch, bl := precision.Int8PerChannel, precision.Int8PerBlock32
	if o.without[ch] < 35 || o.without[bl] < 35 {
		t.Errorf("without the outlier: %.1f and %.1f dB", o.without[ch], o.without[bl])
	}
	if cost := o.without[ch] - o.with[ch]; cost < 10 || o.without[bl]-o.with[bl] >= cost {
		t.Errorf("the outlier costs %.1f dB per channel, %.1f per block", cost, o.without[bl]-o.with[bl])
	}
}
