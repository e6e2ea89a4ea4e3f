package cli

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"gptlab/internal/bf16gemm"
	"gptlab/internal/crc32c"
	"gptlab/models"
	"gptlab/parallel"
	"gptlab/reports"
)

// Every report names the kernels the code runs now: switching one shows
// in the next report's environment.
func TestEnvNamesTheKernelsInUse(t *testing.T) {
	e := reports.CurrentEnv()
	for _, want := range []struct{ component, name string }{{"matmul", models.BLAS()}, {"crc32c", crc32c.Kernel()}} {
		if v, _ := e.Kernels.Get(want.component); v != want.name {
			t.Errorf("env names %s kernel %v, want %s", want.component, v, want.name)
		}
	}
	for _, c := range []string{"elementwise", "fp16 casts", "bf16 casts", "scaler checks", "bf16 matmul", "bf16 attention"} {
		if v, ok := e.Kernels.Get(c); !ok || v == "" {
			t.Errorf("env names no %s kernel", c)
		}
	}
	before := crc32c.Kernel()
	defer crc32c.SetKernel(before)
	if err := crc32c.SetKernel("hash/crc32"); err != nil {
		t.Fatal(err)
	}
	if v, _ := reports.CurrentEnv().Kernels.Get("crc32c"); v != "hash/crc32" {
		t.Errorf("after SetKernel(hash/crc32) the env names %v", v)
	}
}

// TestBadBF16Env: a GPTLAB_BF16 naming no path, or one this machine
// lacks, stops a command with exit 2 and one line naming the variable and
// the value; a path this machine runs is accepted (and named in the
// report's kernels line). The test binary runs as gptlab, so the
// variable is read at the process's start as it is in use.
func TestBadBF16Env(t *testing.T) {
	for _, tc := range []struct {
		value string
		code  int
		says  string
	}{
		{"bogus", 2, "GPTLAB_BF16=bogus: unknown bf16 path"},
		{"amx", 2, "GPTLAB_BF16=amx"}, // where AMX exists: 0 (below)
		{"widen", 0, "bf16 matmul: widen (GPTLAB_BF16)"},
	} {
		cmd, err := parallel.Command(os.Args[0], "run", "test-probe") // through the emulator where the tests run under one
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), envAsMain+"=1", "GPTLAB_BF16="+tc.value)
		var out, errs strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errs
		err = cmd.Run()
		code := 0
		if e, ok := err.(*exec.ExitError); ok {
			code = e.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if tc.value == "amx" && strings.Contains(strings.Join(bf16gemm.Paths(), " "), "amx") {
			tc.code, tc.says = 0, "bf16 matmul: amx (GPTLAB_BF16)"
		}
		lines := stderrLines(errs.String())
		switch {
		case code != tc.code:
			t.Errorf("GPTLAB_BF16=%s: exit %d, want %d; stderr %q", tc.value, code, tc.code, errs.String())
		case code == 2 && (len(lines) != 1 || !strings.Contains(lines[0], tc.says)):
			t.Errorf("GPTLAB_BF16=%s: stderr %q, want one line saying %q", tc.value, errs.String(), tc.says)
		case code == 0 && !strings.Contains(strings.Join(strings.Fields(out.String()), " "), tc.says):
			t.Errorf("GPTLAB_BF16=%s: the report does not say %q:\n%s", tc.value, tc.says, out.String())
		}
	}
}
