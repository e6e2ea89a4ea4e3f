package tensorparallel_test

import (
	"os"
	"testing"

	"gptlab/experiments/cli"
)

// TestMain lets the test binary be gptlab: the lab run on its own
// launches copies of this program as its ranks, which must act as gptlab.
func TestMain(m *testing.M) {
	if os.Getenv("GPTLAB_TEST_MAIN") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Setenv("GPTLAB_TEST_MAIN", "1")
	os.Exit(m.Run())
}
