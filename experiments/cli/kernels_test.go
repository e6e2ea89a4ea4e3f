package cli

import (
	"testing"

	"gptlab/internal/crc32c"
	"gptlab/models"
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
	for _, c := range []string{"elementwise", "fp16 casts", "bf16 casts", "scaler checks", "bf16 matmul"} {
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
