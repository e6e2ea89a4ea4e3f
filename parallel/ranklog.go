package parallel

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// rankLog is the file of every rank's standard error (LaunchConfig.LogRanks).
type rankLog struct {
	mu    sync.Mutex
	f     *os.File
	lines int
}

func newRankLog(job string) (*rankLog, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "gptlab-launch-"+job+".log"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &rankLog{f: f}, nil
}

func (l *rankLog) writeLine(b []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(b)
	l.lines++
}

// end closes the log and keeps it when keep is set and a rank wrote a
// line; it returns the kept file's path, or "" (the file is removed).
func (l *rankLog) end(keep bool) string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Close()
	if keep && l.lines > 0 {
		return l.f.Name()
	}
	os.Remove(l.f.Name())
	return ""
}

// rankWriter is a rank's standard error with LogRanks: every line goes to
// the log, prefixed; rank 0's go to live too, except that a line
// beginning with hold waits for the next line or the rank's exit (finish),
// and is dropped when the rank failed: said keeps it, less hold.
type rankWriter struct {
	prefix string
	log    *rankLog
	live   io.Writer // nil: the log alone
	hold   string
	buf    []byte
	held   []byte
	said   string // the last line beginning with hold (or, with no hold, the last line)
}

func (w *rankWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.line(w.buf[:i+1])
		w.buf = w.buf[i+1:]
	}
	return len(b), nil
}

func (w *rankWriter) line(l []byte) {
	w.log.writeLine(append([]byte(w.prefix), l...))
	text := strings.TrimRight(string(l), "\r\n")
	held := w.hold != "" && strings.HasPrefix(text, w.hold)
	if held || w.hold == "" && strings.TrimSpace(text) != "" {
		w.said = strings.TrimPrefix(text, w.hold)
	}
	if w.live == nil {
		return
	}
	if w.held != nil {
		w.live.Write(w.held)
		w.held = nil
	}
	if held {
		w.held = append([]byte(nil), l...)
		return
	}
	w.live.Write(l)
}

// finish writes what is left of an unterminated last line, and the line
// held back when the rank succeeded.
func (w *rankWriter) finish(success bool) {
	if len(w.buf) > 0 {
		w.line(append(w.buf, '\n'))
		w.buf = nil
	}
	if w.held != nil && success {
		w.live.Write(w.held)
	}
	w.held = nil
}
