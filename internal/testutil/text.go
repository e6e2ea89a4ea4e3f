package testutil

import (
	"strings"
	"unicode/utf8"
)

// WidestLine returns the widest line of s, counted in characters (runes),
// and its width: what a report must keep within 100 columns.
func WidestLine(s string) (int, string) {
	n, line := 0, ""
	for _, l := range strings.Split(s, "\n") {
		if w := utf8.RuneCountInString(l); w > n {
			n, line = w, l
		}
	}
	return n, line
}
