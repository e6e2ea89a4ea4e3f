package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func TestPeerEnvDropsOpenBLASOverrides(t *testing.T) {
	in := []string{"PATH=/bin", "OPENBLAS_CORETYPE=Haswell", "OPENBLAS_NUM_THREADS=1", "OPENBLAS_L2_SIZE=512", "HOME=/root"}
	want := []string{"PATH=/bin", "OPENBLAS_NUM_THREADS=1", "HOME=/root"}
	if got := peerEnv(in); !slices.Equal(got, want) {
		t.Fatalf("peerEnv = %q, want %q", got, want)
	}
	if len(in) != 5 || in[1] != "OPENBLAS_CORETYPE=Haswell" {
		t.Fatalf("peerEnv changed its input: %q", in)
	}
}

func TestRunPeerMissingScriptIsErrNoPeer(t *testing.T) {
	t.Setenv("GPTLAB_PEER_DIR", t.TempDir())
	_, err := RunPeer(context.Background(), "absent.py")
	if !errors.Is(err, ErrNoPeer) || !strings.Contains(err.Error(), "absent.py") {
		t.Fatalf("RunPeer(absent.py) = %v, want ErrNoPeer naming the script", err)
	}
}

// TestRunPeer runs a small script through the interpreter RunPeer finds:
// its JSON lines come back in order, other lines are dropped, the OpenBLAS
// overrides do not reach it, and a failing script's error carries its
// last stderr line.
func TestRunPeer(t *testing.T) {
	testutil.SkipEmulated(t, "the peer is the host's Python, not emulated, and its torch import takes most of a minute there; natively the same test runs")
	dir := t.TempDir()
	t.Setenv("GPTLAB_PEER_DIR", dir)
	t.Setenv("OPENBLAS_CORETYPE", "Haswell")
	script := `import json, os, sys
if sys.argv[1] == "fail":
    sys.exit("the peer failed on purpose")
print("a banner line")
print(json.dumps({"i": 1, "core": os.environ.get("OPENBLAS_CORETYPE", "")}))
print(json.dumps({"i": 2, "arg": sys.argv[1]}))
`
	if err := os.WriteFile(filepath.Join(dir, "p.py"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := RunPeer(context.Background(), "p.py", "x")
	if errors.Is(err, ErrNoPeer) {
		t.Skipf("no PyTorch here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(lines))
	for i, l := range lines {
		got[i] = string(l)
	}
	want := []string{`{"i": 1, "core": ""}`, `{"i": 2, "arg": "x"}`}
	if !slices.Equal(got, want) {
		t.Fatalf("RunPeer lines = %q, want %q", got, want)
	}
	_, err = RunPeer(context.Background(), "p.py", "fail")
	if err == nil || !strings.Contains(err.Error(), "the peer failed on purpose") {
		t.Fatalf("a failing peer gave %v, want its stderr's last line", err)
	}
}
