package reports

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes what src produces to path through a temporary file
// in the same directory, synced and then renamed over path, so a reader (or
// an interrupted run) never sees half a file.
func WriteFileAtomic(path string, src io.WriterTo) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := src.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriterFunc adapts a function to io.WriterTo.
type WriterFunc func(w io.Writer) error

// WriteTo calls f, counting the bytes it writes.
func (f WriterFunc) WriteTo(w io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	err := f(cw)
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
