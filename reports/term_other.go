//go:build !unix

package reports

import "io"

// TerminalWidth is the width text output to w should fit: Width.
func TerminalWidth(w io.Writer) int { return Width }
