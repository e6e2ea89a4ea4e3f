// Package atomicfile writes a file so that a reader, or a run interrupted
// half way, sees either the old file or the whole new one, never part of
// it: the bytes go to a temporary file in the same directory, which is
// synced and then renamed over the target.
//
// It owns only that write; what is written (reports, figures, safetensors
// checkpoints, plans) belongs to its callers.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes what src produces to path through a temporary file in the
// same directory, synced and then renamed over path, so a reader (or an
// interrupted run) never sees half a file. An error names path, never the
// temporary file.
func Write(path string, src io.WriterTo) error {
	fail := func(err error) error {
		var pe *fs.PathError
		var le *os.LinkError
		switch { // the temporary file's name means nothing to the caller
		case errors.As(err, &pe):
			err = pe.Err
		case errors.As(err, &le):
			err = le.Err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fail(err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after a successful rename
	if _, err := src.WriteTo(f); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
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
