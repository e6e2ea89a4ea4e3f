package lab

// peer.go: running the PyTorch peers (../shared/peer/*.py) beside a lab's
// own measurements, where torch is installed.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNoPeer marks a peer that cannot run here: no python3 that imports
// torch, or no peer script. A lab shows the error's text as a note and
// leaves the PyTorch columns out; it is not a failure.
var ErrNoPeer = errors.New("PyTorch peer unavailable")

// RunPeer runs the peer script (a file name in the peer directory, such as
// "torch_infer.py") with args under a python3 that imports torch, and
// returns the JSON objects it printed, one per line, in order. Lines that
// are not JSON objects are ignored.
//
// The peer directory is $GPTLAB_PEER_DIR, else the first shared/peer
// beside the working directory or one of its parents (../shared/peer from
// the repository's root). The interpreter is $GPTLAB_PYTHON, else the
// first of python3 on PATH and /usr/bin/python3 that imports torch.
// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for the peer, so that
// OpenBLAS picks its own kernels for the CPU: a machine-wide override can
// make PyTorch several times slower than it is, and a comparison against
// that would flatter gptlab.
func RunPeer(ctx context.Context, script string, args ...string) ([][]byte, error) {
	path, err := peerScript(script)
	if err != nil {
		return nil, err
	}
	py, err := torchPython()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, py, append([]string{path}, args...)...)
	cmd.Env = peerEnv(os.Environ())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", script, ctx.Err())
		}
		return nil, fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, lastLine(stderr.Bytes()))
	}
	var lines [][]byte
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 && l[0] == '{' {
			lines = append(lines, bytes.Clone(l))
		}
	}
	return lines, sc.Err()
}

// peerEnv is env without the OpenBLAS kernel overrides.
func peerEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "OPENBLAS_CORETYPE=") || strings.HasPrefix(kv, "OPENBLAS_L2_SIZE=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// peerScript finds script in the peer directory.
func peerScript(script string) (string, error) {
	if dir := os.Getenv("GPTLAB_PEER_DIR"); dir != "" {
		p := filepath.Join(dir, script)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: GPTLAB_PEER_DIR has no %s", ErrNoPeer, script)
		}
		return p, nil
	}
	p, err := Shared(filepath.Join("peer", script))
	if err != nil {
		return "", fmt.Errorf("%w: %w (set GPTLAB_PEER_DIR)", ErrNoPeer, err)
	}
	return p, nil
}

// ErrNoShared marks a file of the shared directory that is not here.
var ErrNoShared = errors.New("shared data not found")

// Shared finds rel (a path such as "data/minimalloc") in the shared
// directory: $GPTLAB_SHARED_DIR, else the first shared/ beside the working
// directory or one of its parents (../shared from the repository's root,
// also from a package's directory in its tests). Its data are not part of
// the repository, so a lab that uses them says so when they are absent;
// the error wraps ErrNoShared.
func Shared(rel string) (string, error) {
	if dir := os.Getenv("GPTLAB_SHARED_DIR"); dir != "" {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: GPTLAB_SHARED_DIR has no %s", ErrNoShared, rel)
		}
		return p, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoShared, err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "..", "shared", rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%w: no ../shared/%s beside this directory or its parents", ErrNoShared, filepath.ToSlash(rel))
		}
	}
}

var torchOnce = sync.OnceValues(findTorchPython)

// torchPython is the first interpreter that imports torch, looked for once.
func torchPython() (string, error) { return torchOnce() }

func findTorchPython() (string, error) {
	cands := []string{"python3", "/usr/bin/python3"}
	if py := os.Getenv("GPTLAB_PYTHON"); py != "" {
		cands = []string{py}
	}
	for _, c := range cands {
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.Command(p, "-c", "import torch").Run() == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: no python3 here imports torch (apt-get install python3-torch libopenblas0-pthread)", ErrNoPeer)
}

// lastLine is the last non-empty line of b, for an error message.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
