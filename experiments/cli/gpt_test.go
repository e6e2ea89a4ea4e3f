package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/experiments/gpt"
	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/models"
	"gptlab/precision"
)

// smallGPT is a lab config that trains in about a second.
func smallGPT() *lab.Train {
	return &lab.Train{Config: "tiny", Iters: 40, LR: 1e-2, Warmup: 4, Batch: 4, Beta2: 0.95, EvalBatches: 4, SampleChars: 20}
}

func TestGPTLabReport(t *testing.T) {
	l, err := Find("gpt")
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Run(context.Background(), smallGPT(), lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"parameter_count", "val_loss_nats", "entropy_rate_nats", "oracle_val_loss_nats", "gap_to_oracle_nats", "tokens_per_s", "median_step_ms"} {
		if _, ok := r.Metrics.Get(k); !ok {
			t.Errorf("gpt report has no metric %q", k)
		}
	}
	if len(r.Checks) != 3 {
		t.Fatalf("gpt report has %d checks, want 3: %+v", len(r.Checks), r.Checks)
	}
	labtest.ChecksHold(t, r, "")
	if len(r.FigureList()) != 1 {
		t.Errorf("gpt report has %d figures, want 1 (the loss curve)", len(r.FigureList()))
	}
	// same seed, same config: same losses
	r2, err := l.Run(context.Background(), smallGPT(), lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := r.Metrics.Get("val_loss_nats")
	b, _ := r2.Metrics.Get("val_loss_nats")
	if a != b {
		t.Errorf("two runs with seed 1: val loss %v and %v", a, b)
	}
}

// TestGPTLabPrecision: --set precision reaches the trainer: the report's
// config names the policy, and fp16's loss scaling is reported.
func TestGPTLabPrecision(t *testing.T) {
	fp16, err := precision.ParsePolicy("fp16")
	if err != nil {
		t.Fatal(err)
	}
	l, err := Find("gpt")
	if err != nil {
		t.Fatal(err)
	}
	cfg := smallGPT()
	cfg.Iters, cfg.Warmup, cfg.SampleChars, cfg.Precision = 8, 1, 0, fp16
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Config.Get("precision"); v != "fp16" {
		t.Errorf("report config precision = %v, want fp16", v)
	}
	if s, ok := r.Metrics.Get("loss_scale"); !ok || s != float32(1<<16) {
		t.Errorf("loss_scale metric %v (%v), want 65536", s, ok)
	}
}

func TestBeatsOracle(t *testing.T) {
	oracle := []float64{1.50, 1.45, 1.55, 1.48, 1.52, 1.49}
	near := make([]float64, len(oracle))
	leak := make([]float64, len(oracle))
	for i, o := range oracle {
		near[i] = o + 0.02*float64(i%3-1) // a good model: within noise of the ideal one
		leak[i] = o - 0.4                 // a model that sees its targets
	}
	tol := gpt.OracleTolerance(near, oracle)
	if !(lab.Mean(near) >= lab.Mean(oracle)-tol) {
		t.Errorf("a model within noise of the ideal one fails: mean %.4f, ideal %.4f, tolerance %.4f", lab.Mean(near), lab.Mean(oracle), tol)
	}
	tol = gpt.OracleTolerance(leak, oracle)
	if lab.Mean(leak) >= lab.Mean(oracle)-tol {
		t.Errorf("a model 0.4 nats better than the ideal one passes: tolerance %.4f", tol)
	}
}

// runMain runs the command line and returns its status and outputs.
func runMain(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

func jsonMetrics(t *testing.T, out string) map[string]any {
	t.Helper()
	var r struct {
		Metrics map[string]any `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	return r.Metrics
}

// TestGPTTrainResume: `gpt train` for 6 steps, and for 3 steps then
// --resume for the rest, report bitwise the same final losses; gpt eval on
// the checkpoint gives the report's val loss; gpt sample is reproducible.
func TestGPTTrainResume(t *testing.T) {
	dir := t.TempDir()
	sets := []string{"--set", "config=tiny", "--set", "iters=6", "--set", "eval-every=2", "--set", "eval-batches=2", "--set", "warmup=2", "--set", "dropout=0.1", "--set", "sample-chars=0", "--format", "json"}
	straightDir, partDir, restDir := filepath.Join(dir, "straight"), filepath.Join(dir, "part"), filepath.Join(dir, "rest")
	code, out, errs := runMain(append([]string{"gpt", "train", "--out", straightDir}, sets...)...)
	if code > 1 {
		t.Fatalf("gpt train: status %d: %s", code, errs)
	}
	straight := jsonMetrics(t, out)
	if code, _, errs = runMain(append([]string{"gpt", "train", "--out", partDir, "--steps", "3"}, sets...)...); code > 1 {
		t.Fatalf("gpt train --steps 3: status %d: %s", code, errs)
	}
	code, out, errs = runMain("gpt", "train", "--resume", filepath.Join(partDir, "model.safetensors"), "--out", restDir, "--format", "json")
	if code > 1 {
		t.Fatalf("gpt train --resume: status %d: %s", code, errs)
	}
	resumed := jsonMetrics(t, out)
	for _, k := range []string{"val_loss_nats", "train_loss_nats", "steps"} {
		if straight[k] != resumed[k] {
			t.Errorf("metric %s: straight %v, resumed %v", k, straight[k], resumed[k])
		}
	}
	// negative control: the 3-step run's val loss differs
	if code, out, _ = runMain(append([]string{"gpt", "train", "--steps", "3"}, sets...)...); code > 1 {
		t.Fatalf("gpt train --steps 3 without --out: status %d", code)
	}
	if part := jsonMetrics(t, out); part["train_loss_nats"] == straight["train_loss_nats"] {
		t.Errorf("3 steps and 6 steps give the same train loss %v", part["train_loss_nats"])
	}

	ckpt := filepath.Join(straightDir, "model.safetensors")
	ck, err := models.LoadCheckpoint(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := models.LoadParams(filepath.Join(straightDir, "params.safetensors"))
	if err != nil {
		t.Fatalf("params.safetensors beside the checkpoint: %v", err)
	}
	if !slices.Equal(plain.Data(), ck.Params.Data()) {
		t.Error("params.safetensors holds other parameters than the checkpoint")
	}
	code, out, errs = runMain("gpt", "eval", "--model", ckpt, "--format", "json")
	if code > 1 {
		t.Fatalf("gpt eval: status %d: %s", code, errs)
	}
	if ev := jsonMetrics(t, out); ev["val_loss_nats"] != straight["val_loss_nats"] {
		t.Errorf("gpt eval val loss %v, the training report's %v", ev["val_loss_nats"], straight["val_loss_nats"])
	}

	sample := func(seed string) string {
		code, out, errs := runMain("gpt", "sample", "--model", ckpt, "--tokens", "30", "--seed", seed, "--prompt", "ab")
		if code != 0 {
			t.Fatalf("gpt sample: status %d: %s", code, errs)
		}
		return out
	}
	if a, b := sample("3"), sample("3"); a != b || !strings.HasPrefix(a, "ab") || len([]rune(strings.TrimSpace(a))) != 32 {
		t.Errorf("gpt sample --seed 3 twice: %q and %q; want equal, 32 characters starting with the prompt", a, b)
	}
	if sample("3") == sample("4") {
		t.Error("gpt sample: seeds 3 and 4 give the same text")
	}
	// Bad sample settings, at the command layer: one line each, exit 2.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt", "a€b"}, `'€' at position 1 is not in the vocabulary of 24 characters: "`},
		{[]string{"--top-k", "999"}, "--top-k 999: want 0 (all) to 24"},
		{[]string{"--tokens", "-3"}, "--tokens -3"},
		{[]string{"--temperature", "NaN"}, "--temperature NaN"},
	} {
		code, _, errs := runMain(append([]string{"gpt", "sample", "--model", ckpt}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "invalid GPT config") || strings.Count(errs, "\n") != 1 {
			t.Errorf("gpt sample %q = %d, stderr %q; want 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestGPTCommandErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin := write("bin.txt", strings.Repeat("hello ", 100)+"\xff\xfe")
	short := write("short.txt", "to be or not")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"gpt"}, "subcommand"},
		{"unknown subcommand", []string{"gpt", "fly"}, "fly"},
		{"not utf8", []string{"gpt", "train", "--set", "data=" + bin}, "UTF-8"},
		{"too short", []string{"gpt", "train", "--set", "data=" + short}, "too short"},
		{"missing file", []string{"gpt", "train", "--set", "data=" + filepath.Join(dir, "nope")}, "nope"},
		{"unknown key", []string{"gpt", "train", "--set", "colour=red"}, "colour"},
		{"bad preset", []string{"gpt", "train", "--set", "config=huge"}, "huge"},
		{"bad lr", []string{"gpt", "train", "--set", "lr=-1"}, "lr"},
		{"eval without model", []string{"gpt", "eval"}, "--model"},
		{"eval of a missing file", []string{"gpt", "eval", "--model", filepath.Join(dir, "x.safetensors")}, "x.safetensors"},
		{"sample of a non-checkpoint", []string{"gpt", "sample", "--model", bin}, "bin.txt"},
		{"resume with set", []string{"gpt", "train", "--resume", bin, "--set", "iters=3"}, "--resume"},
		{"bench without train", []string{"bench"}, "name a subcommand: train"},
		{"bench bad steps", []string{"bench", "train", "--steps", "0"}, "steps"},
		{"bench bad executor", []string{"bench", "train", "--set", "executor=gpu"}, "executor=gpu"},
		{"bench bad blas", []string{"bench", "train", "--set", "blas=mkl"}, "blas=mkl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
			args := append(tc.args, "--out", out)
			if tc.name == "no subcommand" || tc.name == "unknown subcommand" || tc.name == "bench without train" || tc.args[1] == "sample" {
				args = tc.args
			}
			code, _, errs := runMain(args...)
			if code != 2 {
				t.Fatalf("Main(%q) = %d, want 2; stderr %q", args, code, errs)
			}
			if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("Main(%q) stderr = %q, want one line mentioning %q", args, errs, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("Main(%q) failed but created %s", args, out)
			}
		})
	}
}

func TestBenchTrainJSON(t *testing.T) {
	code, out, errs := runMain("bench", "train", "--set", "config=tiny", "--steps", "3", "--format", "json")
	if code != 0 {
		t.Fatalf("bench train: status %d: %s", code, errs)
	}
	m := jsonMetrics(t, out)
	for _, k := range []string{"median_step_ms", "allocs_per_step", "bytes_allocated_per_step", "peak_heap_bytes", "tokens_per_s"} {
		v, ok := m[k].(float64)
		if !ok || !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("bench train metric %s = %v, want a positive number", k, m[k])
		}
	}
}

// TestBenchTrainShape: --set layers and block reach the model: its
// parameter count grows by a block's per extra layer and by a row of
// positions per extra token, and the tokens per step follow the block.
func TestBenchTrainShape(t *testing.T) {
	params := func(sets ...string) float64 {
		t.Helper()
		args := []string{"bench", "train", "--set", "config=tiny", "--steps", "1", "--set", "warmup=0", "--format", "json"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		code, out, errs := runMain(args...)
		if code != 0 {
			t.Fatalf("bench train %v: status %d: %s", sets, code, errs)
		}
		return jsonMetrics(t, out)["parameter_count"].(float64)
	}
	cfg, _ := models.Preset("tiny")
	C := float64(cfg.Embd)
	perLayer := 12*C*C + 13*C // attention (4C² + 4C), MLP (8C² + 5C), two layernorms (4C)
	base := params()
	if got := params("layers=3") - base; got != perLayer {
		t.Errorf("layers=3 adds %v parameters to tiny's 2 layers, want one block's %v", got, perLayer)
	}
	if got := params("block=20") - base; got != 4*C {
		t.Errorf("block=20 adds %v parameters to tiny's 16 positions, want 4 rows of wpe (%v)", got, 4*C)
	}
}

// TestBenchTrainProfile: --profile adds the table of the step's ops by
// kind, and its step is the kinds' sum and AdamW's; on two streams, their
// timeline (on one, none); the TapeMachine,
// whose ops the arena does not run, is refused with exit 2.
func TestBenchTrainProfile(t *testing.T) {
	code, out, errs := runMain("bench", "train", "--set", "config=tiny", "--steps", "3", "--profile", "--format", "json")
	if code != 0 {
		t.Fatalf("bench train --profile: status %d: %s", code, errs)
	}
	m := jsonMetrics(t, out)
	step, _ := m["profiled_step_ms"].(float64)
	adamw, _ := m["profiled_adamw_ms"].(float64)
	if !(step > adamw && adamw > 0) || !strings.Contains(out, "Where a step's time goes") || !strings.Contains(out, "matmul A×B") {
		t.Errorf("profiled step %v ms, AdamW %v ms; the table of ops by kind: %v", step, adamw, strings.Contains(out, "Where a step's time goes"))
	}
	// On two streams, the streams' timeline: each busy, within the run.
	run, _ := m["timeline_run_ms"].(float64)
	busy0, _ := m["stream0_busy_ms"].(float64)
	busy1, _ := m["stream1_busy_ms"].(float64)
	wait0, _ := m["stream0_waiting_ms"].(float64)
	help0, _ := m["stream0_helping_ms"].(float64)
	if two := m["streams"] == 2.0; two != strings.Contains(out, "The two streams in the median") || two && !(busy0 > 0 && busy1 > 0 && run >= max(busy0, busy1) && help0 <= wait0) {
		t.Errorf("streams %v: timeline run %v ms, streams busy %v and %v ms; its table: %v", m["streams"], run, busy0, busy1, strings.Contains(out, "The two streams in the median"))
	}
	code, _, errs = runMain("bench", "train", "--set", "config=tiny", "--set", "executor=tape", "--steps", "1", "--profile")
	if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") > 0 || !strings.Contains(errs, "executor=tape") {
		t.Errorf("--profile with the TapeMachine: status %d, %q; want 2 and one line naming it", code, errs)
	}
}

// TestBenchArenaAgainstTape: the arena executor allocates under 1% of
// the bytes per step that gorgonia's TapeMachine does (the arena issue's
// target), measured by bench train on both.
func TestBenchArenaAgainstTape(t *testing.T) {
	bytes := map[string]float64{}
	for _, exec := range []string{"arena", "tape"} {
		code, out, errs := runMain("bench", "train", "--set", "config=tiny", "--set", "executor="+exec, "--steps", "5", "--format", "json")
		if code != 0 {
			t.Fatalf("bench train executor=%s: status %d: %s", exec, code, errs)
		}
		bytes[exec] = jsonMetrics(t, out)["bytes_allocated_per_step"].(float64)
	}
	if bytes["arena"] >= 0.01*bytes["tape"] {
		t.Errorf("arena allocates %.0f bytes per step, TapeMachine %.0f: want under 1%%", bytes["arena"], bytes["tape"])
	}
}

// TestGPTLabTarget: the time to a val-loss target is the training time up
// to the first validation at or below it; an unreached target is said.
func TestGPTLabTarget(t *testing.T) {
	l, err := Find("gpt")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := l.Run(context.Background(), smallGPT(), lab.Options{Seed: 1}) // the run without a target, once
	if err != nil {
		t.Fatal(err)
	}
	first, _ := plain.Metrics.Get("initial_val_loss_nats")
	last, _ := plain.Metrics.Get("val_loss_nats")
	for _, tc := range []struct {
		name   string
		target func(first, last float64) float64
		step   func(iters int) (int, bool) // want steps_to_target, or none
	}{
		{"at the start", func(first, _ float64) float64 { return first + 1 }, func(int) (int, bool) { return 0, true }},
		{"at the end", func(_, last float64) float64 { return last }, nil},
		{"never", func(_, last float64) float64 { return last / 100 }, func(int) (int, bool) { return 0, false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := smallGPT()
			cfg.Target = tc.target(first.(float64), last.(float64))
			r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			steps, reached := r.Metrics.Get("steps_to_target")
			secs, _ := r.Metrics.Get("seconds_to_target")
			switch {
			case tc.step == nil: // reached at the last validation, or earlier
				if !reached || steps.(int) <= 0 || steps.(int) > cfg.Iters || !(secs.(float64) > 0) {
					t.Errorf("target %v (the final val loss): steps_to_target %v, seconds %v; want a step in (0, %d] and a positive time", cfg.Target, steps, secs, cfg.Iters)
				}
			default:
				want, ok := tc.step(cfg.Iters)
				if reached != ok || (ok && (steps.(int) != want || secs.(float64) != 0)) {
					t.Errorf("target %v: steps_to_target %v (%v), seconds %v; want %d (%v) and 0 s", cfg.Target, steps, reached, secs, want, ok)
				}
				if !ok && !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "did not reach the target") }) {
					t.Errorf("unreached target: no note saying so in %q", r.Notes)
				}
			}
		})
	}
}

// TestBenchTrainStreams: --set streams=2 runs the step on the scheduler's
// two streams and reports them (ops on each, the arena on one and two);
// halves, and auto for an even batch, run the batch's two halves on a
// stream each and say so; auto for an odd batch also reports the measured
// runs and which it kept; a bad value, halves of an odd batch, or two
// streams on the TapeMachine, is exit 2 and one line.
func TestBenchTrainStreams(t *testing.T) {
	for _, tc := range []struct {
		streams, batch   string
		measured, halves bool
	}{
		{"2", "2", false, false},
		{"halves", "2", false, true},
		{"auto", "2", false, true},
		{"auto", "3", true, false},
	} {
		code, out, errs := runMain("bench", "train", "--set", "config=tiny", "--steps", "2", "--set", "streams="+tc.streams,
			"--set", "batch="+tc.batch, "--format", "json")
		if code != 0 {
			t.Fatalf("bench train streams=%s batch=%s: status %d: %s", tc.streams, tc.batch, code, errs)
		}
		m := jsonMetrics(t, out)
		ops, _ := m["stream_ops"].(float64)
		chosen, _ := m["streams"].(float64)
		if ops == 0 || (chosen != 1 && chosen != 2) || !(m["arena_bytes_two_streams"].(float64) > 0) {
			t.Errorf("streams=%s batch=%s: metrics %v", tc.streams, tc.batch, m)
		}
		if _, measured := m["stream_measured_two_ms"]; measured != (tc.measured && m["stream1_ops"].(float64) > 0) {
			t.Errorf("streams=%s batch=%s: measured runs reported %v", tc.streams, tc.batch, measured)
		}
		if halves := strings.Contains(out, "two halves of its batch"); halves != (tc.halves && chosen == 2) {
			t.Errorf("streams=%s batch=%s: a note on the halves %v, want %v", tc.streams, tc.batch, halves, tc.halves)
		}
	}
	// auto, the default, means one stream on the TapeMachine.
	if code, _, errs := runMain("bench", "train", "--set", "config=tiny", "--steps", "1", "--set", "executor=tape"); code != 0 {
		t.Errorf("bench train --set executor=tape: exit %d: %s", code, errs)
	}
	for _, sets := range [][]string{{"streams=3"}, {"streams=2", "executor=tape"}, {"streams=halves", "batch=3"}} {
		args := []string{"bench", "train", "--set", "config=tiny", "--steps", "1"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		code, _, errs := runMain(args...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") > 0 || !strings.Contains(errs, "streams=") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming streams", sets, code, errs)
		}
	}
}
