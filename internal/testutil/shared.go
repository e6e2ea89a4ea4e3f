// Package testutil holds helpers the tests of several packages share.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Shared returns the path of ../shared beside the module root (the folder
// holding go.mod), or skips the test with a message when it is absent:
// the data there (MiniMalloc's instances, tinyshakespeare, the shared
// golden case) is not part of the project.
func Shared(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Skip("no go.mod above the test directory, so ../shared cannot be located: skipping")
		}
		dir = up
	}
	shared := filepath.Join(dir, "..", "shared")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("%s is absent: skipping the test that needs its data", shared)
	}
	return shared
}
