package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// A lab that exists only in tests: its single check passes unless the
// config says otherwise, and it panics on request. probeRuns counts its
// runs, so a test can tell that a bad input stopped a command before it.
type probeConfig struct {
	Fail  bool `set:"fail" help:"make the check fail"`
	Panic bool `set:"panic" help:"panic inside Run"`
	Size  int  `set:"size" help:"a number echoed as a metric"`
}

var probeRuns atomic.Int64

func init() {
	labs = append(labs, lab.New("test-probe", "a lab used by the command-line tests", probeConfig{Size: 3}, nil,
		func(ctx context.Context, cfg *probeConfig, opt lab.Options) (*reports.Report, error) {
			probeRuns.Add(1)
			if cfg.Panic {
				panic("shape mismatch")
			}
			r := reports.New("test-probe", "probe")
			r.Metric("size_bytes", cfg.Size)
			r.Metric("seed", opt.Seed)
			t := r.AddTable("numbers", reports.Text("name"), reports.Int("value"))
			t.Row("size", cfg.Size)
			r.Check("size is positive", !cfg.Fail && cfg.Size > 0, "size=%d", cfg.Size)
			return r, nil
		}))
}

func TestMainExitStatus(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string // a word the one-line message must contain
	}{
		{"no command: a short start", nil, 0, ""},
		{"list", []string{"list"}, 0, ""},
		{"help", []string{"help"}, 0, ""},
		{"help for a lab", []string{"help", "test-probe"}, 0, ""},
		{"unknown command", []string{"frobnicate"}, 2, "frobnicate"},
		{"run without a lab", []string{"run"}, 2, "name a lab"},
		{"unknown lab", []string{"run", "nope"}, 2, "nope"},
		{"passing run", []string{"run", "test-probe"}, 0, ""},
		{"failing check", []string{"run", "test-probe", "--set", "fail=true"}, 1, ""},
		{"unknown key", []string{"run", "test-probe", "--set", "colour=red"}, 2, "colour"},
		{"lab not built", []string{"run", plannedLab()}, 2, "not built yet"},
		{"wrong type", []string{"run", "test-probe", "--set", "size=big"}, 2, "size=big"},
		{"bad format", []string{"run", "test-probe", "--format", "xml"}, 2, "xml"},
		{"bad flag", []string{"run", "test-probe", "--sed", "3"}, 2, "sed"},
		{"stray argument", []string{"run", "test-probe", "extra"}, 2, "extra"},
		{"panic becomes an internal error", []string{"run", "test-probe", "--set", "panic=true"}, 3, "internal error: shape mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if slices.Contains(tc.args, "") {
				t.Skip("every lab is built")
			}
			var out, errb bytes.Buffer
			got := Main(tc.args, &out, &errb)
			if got != tc.status {
				t.Fatalf("Main(%q) = %d, want %d; stderr: %s", tc.args, got, tc.status, errb.String())
			}
			if tc.stderr != "" && !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("Main(%q) stderr = %q, want it to mention %q", tc.args, errb.String(), tc.stderr)
			}
			if tc.status == 2 && tc.args != nil {
				if lines := strings.Count(strings.TrimSpace(errb.String()), "\n"); lines != 0 {
					t.Errorf("Main(%q) stderr has %d lines, want one: %q", tc.args, lines+1, errb.String())
				}
			}
		})
	}
}

func TestRunJSONAndOut(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"run", "test-probe", "--seed", "7", "--set", "size=5", "--format", "json", "--out", dir}
	if got := Main(args, &out, &errb); got != 0 {
		t.Fatalf("Main(%q) = %d; stderr: %s", args, got, errb.String())
	}
	var r struct {
		Lab     string         `json:"lab"`
		Config  map[string]any `json:"config"`
		Metrics map[string]any `json:"metrics"`
		Checks  []reports.Check
		Env     reports.Env
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out.String())
	}
	if r.Lab != "test-probe" || r.Config["size"] != 5.0 || r.Config["seed"] != 7.0 || r.Metrics["size_bytes"] != 5.0 {
		t.Errorf("report = %+v, want lab test-probe, size 5, seed 7", r)
	}
	if r.Env.Go == "" || r.Env.Arch == "" {
		t.Errorf("env not filled: %+v", r.Env)
	}
	if errb.Len() != 0 {
		t.Errorf("--format json wrote to stderr: %q", errb.String())
	}
	for _, name := range []string{"report.md", "report.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(b) == 0 {
			t.Errorf("--out did not write %s: %v", name, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestListNamesEveryDesignedLab(t *testing.T) {
	var out bytes.Buffer
	if Main([]string{"list"}, &out, &out) != 0 {
		t.Fatal("list failed")
	}
	for _, name := range []string{"gpt", "reuse", "arena", "checkpoint", "precision", "quantize", "data-parallel",
		"tensor-parallel", "serving", "serving-engine"} {
		if !strings.Contains(out.String(), name) {
			t.Errorf("gptlab list does not name %q", name)
		}
	}
}

// plannedLab names a lab of the design not built yet, or "" once every lab
// is built (the cases about a planned lab are then skipped).
func plannedLab() string {
	for _, l := range Labs() {
		if !l.Built {
			return l.Name
		}
	}
	return ""
}
