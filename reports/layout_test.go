package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"gptlab/internal/testutil"
)

const lorem = "Every plan in this report was verified twice before it was reported: a sweep over time " +
	"that keeps the live buffers ordered by offset, and a byte-pattern execution that writes each " +
	"buffer's own pattern when it is written and reads it back at its last use."

// wideReport has what made reports 467 columns wide: long text cells, many
// numeric columns, long check names and details, long notes.
func wideReport() *Report {
	r := New("demo", "A report with everything wide in it, and a title long enough to need wrapping at forty columns")
	r.Config.Set("configs", []string{"tiny", "small", "baby"})
	r.Config.Set("instances", "/some/rather/long/path/to/a/directory/of/minimalloc/instances/that/goes/on")
	t := r.AddTable("Planners on one problem", Text("planner"), Bytes("peak"), Bytes("lower bound"), Ratio("peak/bound"),
		Bytes("saved vs naive"), Percent("saved", 1), Int("slots"), Float("plan µs", 2), Text("why not (first refusal)"))
	for i, name := range []string{"independent", "best-fit", "greedy-by-size", "search"} {
		t.Row(name, 2304+64*i, 1536, float64(2304+64*i)/1536, 768, 0.333, 3+i, 57.87*float64(i+1),
			fmt.Sprintf("%q is a program input the caller still owns (not donated)", "transformer.wte.weight"))
	}
	t.Row("long", 1<<30, 1536, 2.0, 1, 0.5, 1, 1.0, lorem)
	wide := make([]Column, 16)
	cells := make([]any, 16)
	for j := range wide {
		wide[j] = Bytes(fmt.Sprintf("column number %d", j))
		cells[j] = int64(j+1) * 123456789
	}
	wide[0] = Text("key")
	cells[0] = "row"
	w := r.AddTable("Sixteen columns of numbers", wide...)
	w.Row(cells...)
	cells2 := append([]any(nil), cells...)
	cells2[0] = "other row"
	for j := 1; j < len(cells2); j++ {
		cells2[j] = cells2[j].(int64) + 1<<20
	}
	w.Row(cells2...)
	r.Check("tiny: without donation every in-place update is refused, as the rules of the planner say", true,
		"0 of 36 legal; %q is a program input the caller still owns (not donated); %s", "transformer.wte.weight", lorem)
	r.Check("a check that failed with a long detail", false, "%s", lorem)
	r.Note("%s", lorem)
	return r
}

// TestTextFitsWidth: every line of a wide report fits the width, at 100
// columns and narrower, and nothing is lost: every word of the long text
// is still there (in its cell, wrapped, or in a note).
func TestTextFitsWidth(t *testing.T) {
	for _, width := range []int{100, 72, 50} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			var b bytes.Buffer
			if err := wideReport().WriteTextWidth(&b, width); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if n, line := testutil.WidestLine(out); n > width {
				t.Errorf("widest line %d > %d:\n%s\n\n%s", n, width, line, out)
			}
			flat := strings.Join(strings.Fields(strings.NewReplacer("│", " ", "[1]", " ").Replace(out)), " ")
			for _, word := range []string{"byte-pattern", "transformer.wte.weight", "last", "1 GiB", "1.84 GiB"} {
				if !strings.Contains(flat, word) {
					t.Errorf("text at %d columns lost %q:\n%s", width, word, out)
				}
			}
			// The failed check's detail is there in full, the passed one's is cut.
			if !strings.Contains(flat, "reads it back at its last use.") {
				t.Errorf("the failed check's detail is not shown in full:\n%s", out)
			}
			if strings.Count(flat, "reads it back at its last use.") != 3 { // the note, the failed check, the cell or its note
				t.Errorf("want the long text three times in full (note, long cell, failed check), got %d:\n%s",
					strings.Count(flat, "reads it back at its last use."), out)
			}
		})
	}
}

// TestConstantColumnSaidOnce: a column that never changes is said once
// above the table; with one row nothing is hoisted.
func TestConstantColumnSaidOnce(t *testing.T) {
	r := New("demo", "constants")
	tb := r.AddTable("Arena", Text("config"), Ratio("arena/bound"), Bytes("arena"), Int("allocating ops"))
	tb.Row("tiny", 1.0, 24576, 0)
	tb.Row("small", 1.0, 2097152, 0)
	var b bytes.Buffer
	r.WriteText(&b)
	out := b.String()
	if !strings.Contains(out, "In every row: arena/bound = 1.000; allocating ops = 0") {
		t.Errorf("constant columns not said once above the table:\n%s", out)
	}
	if strings.Contains(out, "│ arena/bound") || strings.Contains(out, "allocating ops │") {
		t.Errorf("a constant column is still a column:\n%s", out)
	}
	dup := New("demo", "repeats")
	dt := dup.AddTable("Arena", Text("config"), Bytes("bound"), Bytes("arena"), Bytes("naive"))
	dt.Row("tiny", 24576, 24576, 155776)
	dt.Row("small", 2097152, 2097152, 11276288)
	b.Reset()
	dup.WriteText(&b)
	if !strings.Contains(b.String(), "In every row: arena = bound") || strings.Contains(b.String(), "│ arena") {
		t.Errorf("a column repeating another is not said once:\n%s", b.String())
	}
	one := New("demo", "one row")
	one.AddTable("t", Text("config"), Int("n")).Row("tiny", 3)
	b.Reset()
	one.WriteText(&b)
	if strings.Contains(b.String(), "In every row") {
		t.Errorf("a one-row table had a column hoisted:\n%s", b.String())
	}
}

// TestSplitWhenNumbersAloneAreTooWide: the sixteen-column table is cut
// into parts, each repeating the key column.
func TestSplitWhenNumbersAloneAreTooWide(t *testing.T) {
	var b bytes.Buffer
	wideReport().WriteText(&b)
	out := b.String()
	if !strings.Contains(out, "Sixteen columns of numbers (part 1 of") {
		t.Fatalf("the sixteen-column table was not split:\n%s", out)
	}
	if parts := strings.Count(out, "│ other row "); parts < 2 {
		t.Errorf("the key column is in %d parts, want every part", parts)
	}
}

func TestWrapAndShorten(t *testing.T) {
	for _, tc := range []struct {
		in    string
		width int
		want  []string
	}{
		{"a bb ccc", 4, []string{"a bb", "ccc"}},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{"x\ny z", 10, []string{"x", "y z"}},
		{"", 5, []string{""}},
		{"µs ≤ ×", 2, []string{"µs", "≤", "×"}},
		// a list breaks after a comma, never inside a number
		{"4,16,64,256,1024,4096", 10, []string{"4,16,64,", "256,1024,", "4096"}},
		{"1024,2048,4096", 6, []string{"1024,", "2048,", "4096"}},
		{"123456789,1", 4, []string{"1234", "5678", "9,1"}},
	} {
		got := wrap(tc.in, tc.width)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("wrap(%q, %d) = %q, want %q", tc.in, tc.width, got, tc.want)
		}
	}
	if got := shorten("0 of 36 legal; the caller owns it", 16); got != "0 of 36 legal…" {
		t.Errorf("shorten = %q, want %q", got, "0 of 36 legal…")
	}
	if got := shorten("short", 16); got != "short" {
		t.Errorf("shorten(short) = %q", got)
	}
}

// FuzzWrap: whatever the text and width, every line fits and no word is
// lost or reordered.
func FuzzWrap(f *testing.F) {
	for _, s := range []string{"a bb ccc", lorem, "µs\t≤ ×\n\nx", "abcdefghijklmnop"} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, width int) {
		if width < 1 || width > 200 || !utf8.ValidString(s) {
			return
		}
		lines := wrap(s, width)
		for _, l := range lines {
			if textWidth(l) > width && utf8.RuneCountInString(l) > 1 {
				t.Fatalf("wrap(%q, %d): line %q is %d wide", s, width, l, textWidth(l))
			}
		}
		if strings.Join(strings.Fields(s), "") != strings.Join(strings.Fields(strings.Join(lines, " ")), "") {
			t.Fatalf("wrap(%q, %d) = %q: text changed", s, width, lines)
		}
	})
}

// FuzzTableFits: whatever the cells (long words, many columns, newlines),
// a report's text fits the width it is given, from 40 columns up.
func FuzzTableFits(f *testing.F) {
	f.Add(lorem, uint8(60), uint8(5), int64(12145664))
	f.Add("a\nb c", uint8(40), uint8(12), int64(-1))
	f.Add(strings.Repeat("transformer.h.0.attn.c_attn.weight ", 9), uint8(0), uint8(1), int64(1)<<40)
	f.Fuzz(func(t *testing.T, text string, w, ncols uint8, n int64) {
		if !utf8.ValidString(text) {
			return
		}
		width := 40 + int(w)%80
		cols := []Column{Text("key")}
		for j := 0; j < int(ncols)%16; j++ {
			if j%3 == 2 {
				cols = append(cols, Text(fmt.Sprintf("text column %d", j)))
			} else {
				cols = append(cols, Bytes(fmt.Sprintf("bytes %d", j)))
			}
		}
		r := New("fuzz", "a table")
		tb := r.AddTable("cells", cols...)
		words := strings.Fields(text)
		for i := 0; i < 3; i++ {
			row := make([]any, len(cols))
			for j, c := range cols {
				if c.Kind == TextKind {
					row[j] = text
					if len(words) > i {
						row[j] = words[i] + text[:len(text)/(i+1)]
					}
				} else {
					row[j] = n + int64(i*j)
				}
			}
			tb.Row(row...)
		}
		r.Check(text, len(text)%2 == 0, "%s", text)
		r.Note("%s", text)
		var b bytes.Buffer
		if err := r.WriteTextWidth(&b, width); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(b.String(), "\n") { // display columns: a wide rune takes two
			if got := textWidth(line); got > width || strings.ContainsFunc(line, unicode.IsControl) {
				t.Fatalf("width %d: a line of %d columns, or with a control character:\n%q\n\n%s", width, got, line, b.String())
			}
		}
	})
}

// TestEmptyTable: a table without rows says so instead of drawing an
// empty box.
func TestEmptyTable(t *testing.T) {
	r := New("demo", "empty")
	r.AddTable("Outside the arena", Text("op"), Bytes("bytes"))
	var b bytes.Buffer
	r.WriteText(&b)
	if !strings.Contains(b.String(), "Outside the arena\n(no rows)\n") || strings.Contains(b.String(), "│ op") {
		t.Errorf("empty table:\n%s", b.String())
	}
}
