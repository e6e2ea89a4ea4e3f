package reports

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/pkg/twwidth"
	"github.com/olekukonko/tablewriter/tw"
)

// This file lays tables out for a terminal: every line of text output fits
// the width (Width unless the terminal is narrower). Numbers never wrap;
// text columns are narrowed, widest first, and their cells wrap at spaces;
// a cell that would still take more than maxCellLines lines becomes a
// numbered note under the table; a table whose numbers alone are too wide
// is split into parts that each repeat the first column.

// Width is the widest line of text output: a report fits a terminal of 100
// columns.
const Width = 100

const (
	minTextWidth  = 8  // a text column is not narrowed below this (or its header's longest word)
	maxCellLines  = 4  // a cell that wraps to more lines becomes a note
	minBriefWidth = 32 // a column of shortened cells is narrowed first, down to this
)

// textWidth is the display width of s in terminal columns.
func textWidth(s string) int { return twwidth.Width(s) }

// clean makes s safe for a terminal: a control character other than a
// newline is shown escaped (\x00), a tab as a space.
func clean(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r != '\n' && unicode.IsControl(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r != '\n' && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks s into lines of at most width columns at spaces, breaking a
// word only when it is longer than a line. Newlines in s are kept.
func wrap(s string, width int) []string {
	width = max(width, 1)
	s = clean(s)
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			for textWidth(word) > width { // a word longer than a line
				if line != "" {
					out = append(out, line)
					line = ""
				}
				head, rest := cut(word, width)
				out = append(out, head)
				word = rest
			}
			switch {
			case line == "":
				line = word
			case textWidth(line)+1+textWidth(word) <= width:
				line += " " + word
			default:
				out = append(out, line)
				line = word
			}
		}
		out = append(out, line)
	}
	return out
}

// Wrap breaks s into lines of at most width columns at spaces, breaking
// a word only when it is longer than a line: the one word-wrap of gptlab,
// for reports and help alike.
func Wrap(s string, width int) []string { return wrap(s, width) }

// cut splits s after the most runes that fit in width columns (at least
// one), after the last comma among them when there is one: a list
// (4,16,64,256) breaks between its items, never inside a number.
func cut(s string, width int) (string, string) {
	w, comma := 0, -1
	for i, r := range s {
		rw := textWidth(string(r))
		if w+rw > width && i > 0 {
			if comma > 0 {
				return s[:comma], s[comma:]
			}
			return s[:i], s[i:]
		}
		w += rw
		if r == ',' {
			comma = i + 1
		}
	}
	return s, ""
}

// shorten fits s on one line of width columns, ending a cut line with "…"
// (at a space when one is in the second half).
func shorten(s string, width int) string {
	s = strings.Join(strings.Fields(clean(s)), " ")
	if textWidth(s) <= width {
		return s
	}
	head, _ := cut(s, max(width-1, 1))
	if i := strings.LastIndexFunc(head, unicode.IsSpace); i > len(head)/2 {
		head = head[:i]
	}
	return strings.TrimRightFunc(head, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsPunct(r) }) + "…"
}

// writeWrapped writes s wrapped to width, every line after the first
// indented by indent spaces (and so wrapped to width-indent).
func writeWrapped(w io.Writer, s string, width, indent int) {
	lines := wrap(s, width)
	if len(lines) > 1 && indent > 0 {
		// Wrap what follows the first line again, narrower: the first
		// line's words are the first words of s.
		words := strings.Fields(s)
		first := len(strings.Fields(lines[0]))
		if strings.Join(words[:first], " ") == lines[0] {
			lines = append(lines[:1], wrap(strings.Join(words[first:], " "), width-indent)...)
		} else { // the first word was broken: indent nothing
			indent = 0
		}
	}
	for i, l := range lines {
		if i > 0 {
			l = strings.Repeat(" ", indent) + l
		}
		fmt.Fprintln(w, l)
	}
}

// boxWidth is the width of a box table with columns of these widths:
// "│ a │ b │" is 1 + (w+3) per column.
func boxWidth(ws []int) int {
	n := 1
	for _, w := range ws {
		n += w + 3
	}
	return n
}

// longestWord is the width of the longest word of s.
func longestWord(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		n = max(n, textWidth(w))
	}
	return n
}

// widths chooses the column widths of f for a line of width columns.
// From the natural widths, the widest column is narrowed one step at a
// time: a text column down to its longest word (at most softWord), a
// numeric one down to its widest cell (its header wraps); then, with
// breakWords and if that is not enough, text columns further, breaking
// words. The result may still be wider than width.
func widths(f formatted, width int, breakWords bool) []int {
	n := len(f.headers)
	nat, soft, hard := make([]int, n), make([]int, n), make([]int, n)
	for j, h := range f.headers {
		cellMax, word := 0, 0
		for i := range f.cells {
			for _, l := range strings.Split(f.cells[i][j], "\n") {
				cellMax = max(cellMax, textWidth(l))
			}
			word = max(word, longestWord(f.cells[i][j]))
		}
		nat[j] = max(textWidth(h), cellMax, 1)
		if f.numeric[j] {
			soft[j] = max(cellMax, longestWord(h), 1)
			hard[j] = soft[j]
		} else {
			hard[j] = max(min(nat[j], minTextWidth), longestWord(h), 1)
			soft[j] = max(hard[j], min(word, softWord))
		}
	}
	// A column of passed checks' details is cut to one line anyway: narrow
	// it first, to a readable minimum.
	short := make([]int, n)
	for j := range short {
		short[j] = nat[j]
		for i := range f.cells {
			if f.brief[i][j] {
				short[j] = max(min(nat[j], minBriefWidth), soft[j])
				break
			}
		}
	}
	ws := append([]int(nil), nat...)
	lows := [][]int{short, soft}
	if breakWords {
		lows = append(lows, hard)
	}
	for _, low := range lows {
		for boxWidth(ws) > width {
			j := widest(ws, low)
			if j < 0 {
				break
			}
			ws[j]--
		}
	}
	return ws
}

// softWord is the longest word a text column keeps whole while other
// columns can still be narrowed.
const softWord = 16

// widest is the widest column above its minimum in low, or -1; among
// equals, the last (text usually trails the numbers it explains).
func widest(ws, low []int) int {
	best := -1
	for j := range ws {
		if ws[j] > low[j] && (best < 0 || ws[j] >= ws[best]) {
			best = j
		}
	}
	return best
}

// WriteText writes the table alone as text that fits width columns (its
// title first, if it has one), every column shown: command help lists
// settings with it.
func (t *Table) WriteText(w io.Writer, width int) error {
	return writeTextTable(w, t.format(false), width)
}

// writeTextTable writes one table (title, constants, box, notes) so that
// every line fits width.
func writeTextTable(w io.Writer, f formatted, width int) error {
	if len(f.cells) == 0 {
		if f.title != "" {
			writeWrapped(w, f.title, width, 2)
		}
		fmt.Fprintln(w, "(no rows)")
		return nil
	}
	ws := widths(f, width, false)
	if boxWidth(ws) > width {
		if len(ws) > 2 {
			return writeSplit(w, f, width)
		}
		ws = widths(f, width, true)
	}
	if f.title != "" {
		writeWrapped(w, f.title, width, 2)
	}
	if len(f.consts) > 0 {
		writeWrapped(w, "In every row: "+strings.Join(f.consts, "; "), width, 2)
	}
	notes := append([]string(nil), f.notes...)
	rows := make([][]string, len(f.cells))
	for i, row := range f.cells {
		rows[i] = make([]string, len(row))
		for j, c := range row {
			switch {
			case f.numeric[j]:
				rows[i][j] = c
			case f.brief[i][j]:
				rows[i][j] = shorten(c, ws[j])
			default:
				lines := wrap(c, ws[j])
				if len(lines) > maxCellLines {
					k := slices.Index(notes, c) // the same text, the same note
					if k < 0 {
						notes = append(notes, c)
						k = len(notes) - 1
					}
					rows[i][j] = fmt.Sprintf("[%d]", k+1)
					continue
				}
				rows[i][j] = strings.Join(lines, "\n")
			}
		}
	}
	headers := make([]any, len(f.headers))
	align := make([]tw.Align, len(f.headers))
	for j, h := range f.headers {
		headers[j] = strings.Join(wrap(h, ws[j]), "\n")
		align[j] = tw.AlignLeft
		if f.numeric[j] {
			align[j] = tw.AlignRight
		}
	}
	tb := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignCenter),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
	)
	tb.Header(headers...)
	for _, row := range rows {
		if err := tb.Append(row); err != nil {
			return fmt.Errorf("table %q: %w", f.title, err)
		}
	}
	if err := tb.Render(); err != nil {
		return fmt.Errorf("table %q: %w", f.title, err)
	}
	for i, n := range notes {
		tag := fmt.Sprintf("[%d] ", i+1)
		writeWrapped(w, tag+n, width, len(tag))
	}
	return nil
}

// writeSplit writes a table too wide for width as parts that each hold
// the first column and as many of the others as fit.
func writeSplit(w io.Writer, f formatted, width int) error {
	var parts [][]int
	part := []int{0}
	for j := 1; j < len(f.headers); j++ {
		try := append(append([]int(nil), part...), j)
		if len(part) > 1 && boxWidth(widths(f.columns(try), width, false)) > width {
			parts = append(parts, part)
			try = []int{0, j}
		}
		part = try
	}
	parts = append(parts, part)
	for k, cols := range parts {
		sub := f.columns(cols)
		sub.title = fmt.Sprintf("%s (part %d of %d)", f.title, k+1, len(parts))
		if k > 0 {
			sub.consts, sub.notes = nil, nil
			fmt.Fprintln(w)
		}
		if err := writeTextTable(w, sub, width); err != nil {
			return err
		}
	}
	return nil
}

// columns is f with only the given columns.
func (f formatted) columns(cols []int) formatted {
	out := formatted{title: f.title, consts: f.consts, notes: f.notes}
	for _, j := range cols {
		out.headers = append(out.headers, f.headers[j])
		out.numeric = append(out.numeric, f.numeric[j])
	}
	for i := range f.cells {
		var row []string
		var short []bool
		for _, j := range cols {
			row = append(row, f.cells[i][j])
			short = append(short, f.brief[i][j])
		}
		out.cells = append(out.cells, row)
		out.brief = append(out.brief, short)
	}
	return out
}
