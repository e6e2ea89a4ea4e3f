package testutil

import (
	"testing"

	"gptlab/internal/emulated"
)

// Trimmed reports whether a test should take its smaller case: under
// go test -short in a process that runs emulated (emulated.Is: qemu-user,
// tens of times slower than the host). A test that trims says in its
// comment what it keeps; the full case runs natively.
func Trimmed() bool { return testing.Short() && isEmulated() }

// isEmulated is emulated.Is (a test of this package replaces it).
var isEmulated = emulated.Is

// SkipEmulated skips a test under -short in an emulated process, with a
// message naming why (why says what covers the skipped work instead: "the
// native run and TestX's smaller case check the same ...").
func SkipEmulated(t testing.TB, why string) {
	t.Helper()
	if Trimmed() {
		t.Skipf("skipped under -short when %s: %s", emulated.Label, why)
	}
}

// SkipSpeedEmulated skips a benchmark whose figure is a speed in an
// emulated process (with or without -short): the emulator's time is not
// the architecture's, and printing it would pass it off as one.
func SkipSpeedEmulated(b *testing.B) {
	b.Helper()
	if isEmulated() {
		b.Skipf("%s: speed is not measured under emulation (the figure would be the emulator's)", emulated.Label)
	}
}
