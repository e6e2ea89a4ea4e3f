package parallel

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// EnvExec names a command that the launcher runs every worker through:
// the worker becomes "COMMAND ARGS... PROGRAM ARGUMENTS...". It is meant
// for user-mode emulation, where a binary of another architecture cannot
// be executed directly (no binfmt_misc registration):
//
//	GOARCH=arm64 GPTLAB_LAUNCH_EXEC=qemu-aarch64-static go test -exec qemu-aarch64-static ./parallel/
//
// The workers inherit it, so a job launched from a worker is emulated too.
// Unset (the normal case), the program is run as it is.
const EnvExec = "GPTLAB_LAUNCH_EXEC"

// execWrapper is the command of EnvExec, split at spaces, checked to be
// on PATH; nil when unset.
func execWrapper() ([]string, error) {
	w := strings.Fields(os.Getenv(EnvExec))
	if len(w) == 0 {
		return nil, nil
	}
	p, err := exec.LookPath(w[0])
	if err != nil {
		return nil, fmt.Errorf("launch: %s=%q: %w", EnvExec, os.Getenv(EnvExec), err)
	}
	w[0] = p
	return w, nil
}

// wrapCommand is the command that runs path with args, through wrapper
// when it is set.
func wrapCommand(wrapper []string, path string, args ...string) *exec.Cmd {
	if len(wrapper) == 0 {
		return exec.Command(path, args...)
	}
	return exec.Command(wrapper[0], append(append(wrapper[1:len(wrapper):len(wrapper)], path), args...)...)
}

// Command is exec.Command(path, args...) run through EnvExec when it is
// set: how a program (or a test binary) starts a copy of itself so that,
// under user-mode emulation, the copy is emulated too. The error is
// EnvExec's command not found.
func Command(path string, args ...string) (*exec.Cmd, error) {
	wrapper, err := execWrapper()
	if err != nil {
		return nil, err
	}
	return wrapCommand(wrapper, path, args...), nil
}

// qemuArch is QEMU's name for this architecture (qemu-aarch64-static).
func qemuArch() string {
	switch runtime.GOARCH {
	case "arm64":
		return "aarch64"
	case "amd64":
		return "x86_64"
	case "386":
		return "i386"
	}
	return runtime.GOARCH
}
