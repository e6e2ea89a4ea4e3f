package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputs: each bad input gets exit 2 and one line on stderr naming
// what is wrong; none runs the work first or leaves an --out behind.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	short := filepath.Join(dir, "short.txt")
	for p, content := range map[string]string{file: "", short: "hello world\n"} {
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	example := planExample
	tests := []struct {
		name string
		args []string
		want string
	}{
		// values accepted silently before
		{"steps beyond iters", []string{"gpt", "train", "--steps", "50", "--set", "iters=10", "--set", "warmup=2"}, "--steps 50 is more than iters=10"},
		{"warmup beyond iters", []string{"run", "gpt", "--set", "warmup=500", "--set", "iters=50"}, "warmup=500 is longer than iters=50"},
		{"eval-every beyond iters", []string{"run", "gpt", "--set", "iters=10", "--set", "warmup=1", "--set", "eval-every=50"}, "eval-every=50"},
		{"negative target", []string{"run", "gpt", "--set", "target=-1"}, "target=-1"},
		{"quick does not drop config", []string{"run", "gpt", "--quick", "--set", "config=huge"}, "config=huge"},
		{"quick does not drop batch", []string{"run", "gpt", "--quick", "--set", "batch=-2"}, "batch=-2"},
		{"set out of range", []string{"run", "gpt", "--set", "iters=99999999999999999999"}, "out of range"},
		{"flag out of range", []string{"gpt", "train", "--steps", "99999999999999999999"}, `--steps "99999999999999999999": out of range`},
		{"flag not an integer", []string{"gpt", "train", "--steps", "x"}, `--steps "x": not an integer`},
		{"flag without value", []string{"gpt", "train", "--steps"}, "--steps needs a value"},
		{"unknown flag", []string{"run", "test-probe", "--sed", "3"}, "unknown flag --sed"},
		{"beta2 zero", []string{"run", "gpt", "--set", "beta2=0"}, "beta2=0"},
		{"lr NaN", []string{"run", "gpt", "--set", "lr=NaN"}, "lr=NaN"},
		{"huge batch", []string{"run", "gpt", "--set", "batch=100000"}, "batch=100000"},
		{"unknown precision", []string{"gpt", "train", "--set", "precision=fp8"}, "precision=fp8: want one of f32, bf16"},
		{"empty configs", []string{"run", "arena", "--set", "configs="}, "configs="},
		{"unknown preset in a list", []string{"run", "arena", "--set", "configs=tiny,huge"}, `"huge"`},
		// --out checked before running
		{"run --out a file", []string{"run", "test-probe", "--out", file}, "--out " + file + ": not a directory"},
		{"run --out under a file", []string{"run", "test-probe", "--out", filepath.Join(file, "sub")}, file},
		{"gate --out a file", []string{"exit-gate", "--out", file}, "--out " + file},
		{"train --out a file", []string{"gpt", "train", "--out", file}, "--out " + file},
		{"bench layers beyond its bound", []string{"bench", "train", "--set", "layers=97"}, "--set layers=97: want 1 to 96"},
		{"bench negative block", []string{"bench", "train", "--set", "block=-1"}, "--set block=-1"},
		{"bench --out a file", []string{"bench", "train", "--out", file}, "--out " + file},
		{"grads --out in no directory", []string{"gpt", "grads", "--model", "m", "--batch", "b", "--out", filepath.Join(dir, "no", "o.safetensors")}, "gpt grads --out"},
		{"grads --out a directory", []string{"gpt", "grads", "--model", "m", "--batch", "b", "--out", dir}, "is a directory"},
		{"plan --out a directory", []string{"plan", example, "--out", dir}, "plan --out " + dir},
		// sample settings
		{"sample negative tokens", []string{"gpt", "sample", "--model", file, "--tokens", "-1"}, "--tokens -1"},
		{"sample negative temperature", []string{"gpt", "sample", "--model", file, "--temperature", "-1"}, "--temperature -1"},
		{"sample not a checkpoint", []string{"gpt", "sample", "--model", file}, file},
		// plan
		{"plan bad time limit", []string{"plan", example, "--time-limit", "0s"}, "--time-limit 0s"},
		{"plan duration not a duration", []string{"plan", example, "--time-limit", "soon"}, "not a duration"},
		{"plan unknown planner", []string{"plan", example, "--algo", "nope"}, "want auto, independent"},
		{"plan empty file", []string{"plan", file}, "empty file"},
		{"plan not a csv", []string{"plan", short}, "header"},
		// commands
		{"help of nothing known", []string{"help", "nope"}, `"nope"`},
		{"group without subcommand", []string{"gpt"}, "name a subcommand"},
		{"unknown subcommand", []string{"bench", "allreduce-x"}, "allreduce-x"},
		{"list with an argument", []string{"list", "x"}, `"x"`},
		{"data too short", []string{"run", "gpt", "--set", "data=" + short}, "too short"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := probeRuns.Load()
			code, _, errs := runMain(tc.args...)
			if code != 2 {
				t.Fatalf("Main(%q) = %d, want 2; stderr %q", tc.args, code, errs)
			}
			if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "gptlab: ") {
				t.Errorf("Main(%q) stderr = %q, want one line mentioning %q", tc.args, errs, tc.want)
			}
			if strings.Contains(errs, ".tmp") || strings.Contains(errs, "context canceled") {
				t.Errorf("Main(%q) stderr names a temporary file or a context: %q", tc.args, errs)
			}
			if probeRuns.Load() != before {
				t.Errorf("Main(%q) ran the lab before refusing the input", tc.args)
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 2 {
		t.Errorf("bad inputs left files behind: %v", left)
	}
}
