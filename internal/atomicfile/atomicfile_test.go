package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A writer that fails half way must leave the old file untouched.
	err := Write(path, WriterFunc(func(w io.Writer) error {
		w.Write([]byte("half"))
		return errors.New("interrupted")
	}))
	if err == nil {
		t.Fatal("Write succeeded with a failing writer")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("after a failed write the file holds %q, want %q", b, "old")
	}
	if err := Write(path, WriterFunc(func(w io.Writer) error { _, err := w.Write([]byte("new")); return err })); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("file holds %q, want %q", b, "new")
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode = %v (%v), want -rw-r--r--", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestWriteNamesThePath: an error names the file asked for, not the
// temporary file it was written through.
func TestWriteNamesThePath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sol.csv")
	if err := os.Mkdir(path, 0o755); err != nil { // a directory where the file should go
		t.Fatal(err)
	}
	err := Write(path, WriterFunc(func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }))
	if err == nil || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("Write over a directory = %v, want an error naming %s and no temporary file", err, path)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// TestWriterFuncCounts: WriteTo reports the bytes the function wrote.
func TestWriterFuncCounts(t *testing.T) {
	var b strings.Builder
	n, err := WriterFunc(func(w io.Writer) error {
		io.WriteString(w, "abc")
		_, err := io.WriteString(w, "de")
		return err
	}).WriteTo(&b)
	if n != 5 || err != nil || b.String() != "abcde" {
		t.Errorf("WriteTo = %d, %v (wrote %q), want 5, nil (\"abcde\")", n, err, b.String())
	}
}
