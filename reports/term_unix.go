//go:build unix

package reports

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// TerminalWidth is the width text output to w should fit: the terminal's
// columns when w is a terminal narrower than Width, else Width.
func TerminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return Width
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return Width
	}
	return min(Width, max(int(ws.Col), 40))
}
