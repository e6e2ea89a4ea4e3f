package servingengine

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/internal/testutil"
	"gptlab/reports"
)

// TestLabQuick runs the lab small (no PyTorch) and holds its checks that
// are not timings: greedy and preemption equality, invariants, blocks
// free after every run; and the metrics the issue names are there.
func TestLabQuick(t *testing.T) {
	sets := []string{"requests=30", "batches=1,32", "torch=0", "contexts=8", "chunks=32", "goodput-requests=40"}
	if testutil.Trimmed() { // emulated -short: the small model, 10 requests, 15 tokens a sequence (natively baby, 30, 63);
		// one latency run a rate, goodput runs of 12 requests at two loads (natively 3 runs a rate, 40 requests at three)
		sets = append(sets, "model=small", "requests=10", "tokens=15", "latency-repeats=1",
			"goodput-requests=12", "goodput-loads=0.25,0.5")
	}
	r, err := labtest.Run(Lab, true, sets...)
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	for _, name := range []string{"decode_tokens_per_s_b1", "decode_tokens_per_s_b32", "prefill_tokens_per_s",
		"sim_ttft_p50_error_ratio", "sim_ttft_p90_error_ratio", "sim_tpot_p50_error_ratio", "sim_tpot_p90_error_ratio"} {
		v, ok := r.Metrics.Get(name)
		if !ok || !(labtest.Float(v) > 0) {
			t.Errorf("metric %s = %v (present %v)", name, v, ok)
		}
	}
	names := map[string]bool{}
	for _, c := range r.Checks {
		names[c.Name] = true
	}
	for _, want := range []string{"invariants held", "blocks free after every run", "a preempted request resumes to the same tokens: tiny pool, swap"} {
		if !names[want] {
			t.Errorf("no check %q", want)
		}
	}
}

func TestLabBadInput(t *testing.T) {
	for _, set := range []string{"model=huge", "batches=0", "prompt=60", "loads=0.5,0.2,0.9", "prompt-lens=uniform:4:60", "threads=0", "weights=int4", "goodput-loads=0.5"} {
		if _, err := labtest.Run(Lab, true, set); !errors.Is(err, lab.ErrUsage) {
			t.Errorf("--set %s: %v, want a usage error", set, err)
		}
	}
}

// TestLabSettingsAtEdges sweeps every setting to the edges of its range
// and just past them, on the tiny model (its window of 16 tokens is where
// the lab's own requests used to overrun): each run ends in a usage error
// naming the setting (exit 2) or in a report, never in a panic or another
// error. Failed timed checks are the machine's business and are allowed.
func TestLabSettingsAtEdges(t *testing.T) {
	base := []string{"model=tiny", "tokens=15", "contexts=8", "goodput-output=uniform:1:8", "prompt-lens=uniform:4:8",
		"output-lens=uniform:4:8", "torch=0", "requests=30", "goodput-requests=10", "batches=1", "chunks=16", "latency-repeats=1"}
	usage := [][]string{
		{"model=huge"}, {"weights=int4"}, {"batches=0"}, {"batches=257"}, {"prompt=0"}, {"prompt=2"}, {"tokens=1"},
		{"contexts=0"}, {"contexts=12"}, {"chunks=0"}, {"chunks=4097"}, {"repeats=0"}, {"repeats=101"},
		{"requests=9"}, {"requests=100001"}, {"loads=0,0.5,0.9"}, {"loads=0.5,0.6"}, {"loads=0.5,0.6,101"},
		{"loads=0.6,0.5,0.9"}, {"latency-repeats=0"}, {"latency-repeats=101"}, {"prompt-lens=bogus"},
		{"prompt-lens=uniform:4:9"}, {"output-lens=uniform:4:13"}, {"goodput-prompt=uniform:2:9"},
		{"goodput-output=uniform:1:15"}, {"goodput-loads=0.5"}, {"goodput-loads=0,0.5"}, {"goodput-cv=0"},
		{"goodput-cv=10.5"}, {"goodput-requests=9"}, {"goodput-requests=100001"}, {"goodput-budget=-1s"},
		{"goodput-budget=2h"}, {"block-size=0"}, {"block-size=1025"}, {"blocks=0"}, {"blocks=1"}, {"blocks=1048577"},
		{"block-size=1", "blocks=15"}, {"block-size=1024", "blocks=1048576"}, {"max-seqs=0"}, {"max-seqs=4097"},
		{"max-tokens=0"}, {"max-tokens=65537"}, {"slo-ttft=-1s"}, {"slo-tpot=-1s"}, {"threads=0"}, {"threads=257"},
		{"torch-rounds=0"}, {"torch-rounds=101"},
	}
	for _, sets := range usage {
		if _, err := labtest.Run(Lab, true, append(slices.Clone(base), sets...)...); !errors.Is(err, lab.ErrUsage) {
			t.Errorf("--set %v: %v, want a usage error", sets, err)
		} else if key, _, _ := strings.Cut(sets[0], "="); !strings.Contains(err.Error(), key) {
			t.Errorf("--set %v: %q does not name %s", sets, err, key)
		}
	}
	if testutil.Trimmed() {
		t.Skip("emulated -short: the runs at the edges take minutes under qemu; the usage errors above are checked")
	}
	reports := [][]string{
		{}, {"prompt=1", "tokens=2"}, {"prompt=14", "tokens=2"}, {"contexts=1,11"}, {"chunks=1,4096"}, {"batches=256"},
		{"weights=int8"}, {"blocks=2"}, {"block-size=1", "blocks=17"}, {"block-size=1024", "blocks=64"},
		{"max-seqs=1"}, {"max-tokens=1"}, {"max-seqs=4096", "max-tokens=65536"}, {"loads=99,99.5,100"},
		{"goodput-loads=99,100"}, {"goodput-cv=10"}, {"goodput-cv=0.01"}, {"slo-ttft=1ns"}, {"slo-tpot=1ns"},
		{"slo-ttft=1h", "slo-tpot=1h"}, {"output-lens=fixed:8"}, {"goodput-output=fixed:1"},
		{"prompt-lens=fixed:1", "output-lens=uniform:1:15"}, // prompts all alike: no cost fit, the simulator left out
	}
	for _, sets := range reports {
		r, err := labtest.Run(Lab, true, append(slices.Clone(base), sets...)...)
		if err != nil {
			t.Errorf("--set %v: %v, want a report", sets, err)
			continue
		}
		for _, c := range r.Checks {
			if !c.Pass && !c.Timed {
				t.Errorf("--set %v: check %q failed: %s", sets, c.Name, c.Detail)
			}
		}
	}
}

// TestPeerRoundsCarryThePeersSpread: a round of the checks against
// PyTorch is one run of the peer beside one decode run of ours, so the
// peer's own run-to-run spread reaches the verdict: a peer steadily far
// slower than the engine passes the batch-32 target, one steadily far
// faster fails it, and one alternating between the two leaves it
// inconclusive (one run of it would have decided either way). The peer
// is a stand-in interpreter printing the tokens/s it is given, run after
// run.
func TestPeerRoundsCarryThePeersSpread(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in interpreter is a shell script")
	}
	dir := t.TempDir()
	py := filepath.Join(dir, "python")
	sh := `#!/bin/sh
[ "$1" = -c ] && exit 0
n=$(cat "$PEERDIR/n" 2>/dev/null || echo 0)
echo $((n+1)) > "$PEERDIR/n"
echo "{\"decode_tokens_per_s\": $(sed -n "$((n+1))p" "$PEERDIR/tps")}"
`
	for name, body := range map[string]string{py: sh, filepath.Join(dir, "torch_infer.py"): ""} {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("GPTLAB_PYTHON", py)
	t.Setenv("GPTLAB_PEER_DIR", dir)
	t.Setenv("PEERDIR", dir)
	cfg := engineDefaults
	cfg.Model, cfg.Tokens, cfg.Repeats = "small", 8, 1
	el, err := newEngineLab(&cfg, lab.Options{Seed: 1, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tps  []string
		want reports.Verdict
	}{
		{"slower", []string{"1", "1", "1", "1", "1", "1"}, reports.Pass},
		{"faster", []string{"1e12", "1e12", "1e12", "1e12", "1e12", "1e12"}, reports.Fail},
		{"alternating", []string{"1", "1e12", "1", "1e12", "1", "1e12"}, reports.Inconclusive},
	} {
		if err := os.WriteFile(filepath.Join(dir, "tps"), []byte(strings.Join(tc.tps, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, "n")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		_, rounds, err := el.peerRounds(context.Background(), 32, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		tm := lab.RatioTarget{Target: 1 / targets[32]}.Decide(rounds)
		if len(rounds) != cfg.TorchRounds || tm.Verdict() != tc.want {
			t.Errorf("%s peer: %d rounds, %s (%s), want %d rounds, %s", tc.name, len(rounds), tm.Verdict(), tm.Phrase(), cfg.TorchRounds, tc.want)
		}
	}
}
