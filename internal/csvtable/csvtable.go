// Package csvtable reads the CSV tables gptlab takes as input (gptlab
// plan's MiniMalloc files, the serving lab's traces): one reader, so every
// such file is read the same way and a fault in one is reported in the
// same words as in another.
//
// A table is lines of comma-separated fields. The first line may start
// with a UTF-8 byte-order mark (stripped), line ends may be LF or CRLF,
// blank lines are skipped (and, when the format says so, lines whose first
// non-blank character is #). A field is trimmed of spaces; it may be
// quoted ("a, b", with "" for a quote inside) but may not span lines. The
// header names the columns, in any order; a format may let the header be
// left out, the columns then being in the format's order. Rows are read
// one at a time (Reader.Next), so a caller that consumes them one by one
// holds one line, not the file. Every error is one line starting
// "line N: " that names the column and the value at fault; callers wrap
// it in their own sentinel.
//
// It owns the syntax and typed fields (Row.Int, Row.Float), not what a
// table means: which rows are valid together is the caller's.
package csvtable

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Column is one column a format knows.
type Column struct {
	Name string
	// Optional columns may be absent from the header; a row may leave
	// their fields empty, or leave them out at its end.
	Optional bool
}

// Format says which columns a table has and how it is laid out.
type Format struct {
	Columns []Column // in the order of a file without a header
	// HeaderOptional lets the header be left out: a first line naming
	// none of the columns is then a row, its fields in Columns' order.
	HeaderOptional bool
	Comments       bool // skip lines whose first non-blank character is #
	MaxLine        int  // the longest line in bytes; 0: DefaultMaxLine
}

// DefaultMaxLine bounds a line when the format does not, so a file without
// newlines cannot exhaust memory.
const DefaultMaxLine = 1 << 16

// Error is a fault in a table: its line (0 when it concerns the whole
// file) and what is wrong.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Reader reads a table's rows.
type Reader struct {
	f      Format
	sc     *bufio.Scanner
	line   int
	cols   []int    // cols[k]: the field index of f.Columns[k], -1 when absent
	header []string // the columns in field order
	min    int      // the fewest fields a row may have
	first  []string // a first line that was a row, not a header
	buf    []string // the fields of the line last read, reused
	row    Row
	eof    bool
}

// NewReader reads through the header of the table in r (when there is
// one: see Format.HeaderOptional). A header naming a column the format
// does not know, or one twice, or lacking a required one is an *Error on
// its line, and so is an empty file where a header is required.
func NewReader(r io.Reader, f Format) (*Reader, error) {
	max := f.MaxLine
	if max <= 0 {
		max = DefaultMaxLine
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(max, 4096)), max+1) // +1: a line of max bytes and its \r
	t := &Reader{f: f, sc: sc}
	fields, err := t.nextLine()
	if err == io.EOF {
		if f.HeaderOptional {
			t.eof = true
			return t, nil
		}
		return nil, &Error{Msg: "empty file: want the header " + t.want()}
	}
	if err != nil {
		return nil, err
	}
	if f.HeaderOptional && !t.namesAColumn(fields) {
		t.useOrder(len(f.Columns))
		t.first = fields
		t.buf = nil // t.first holds it
		return t, nil
	}
	if err := t.readHeader(fields); err != nil {
		return nil, err
	}
	return t, nil
}

// want is the header the format wants, for messages: "a,b,c and
// optionally d".
func (t *Reader) want() string {
	var req, opt []string
	for _, c := range t.f.Columns {
		if c.Optional {
			opt = append(opt, c.Name)
		} else {
			req = append(req, c.Name)
		}
	}
	s := strings.Join(req, ",")
	if len(opt) > 0 {
		s += " and optionally " + strings.Join(opt, ",")
	}
	return s
}

func (t *Reader) namesAColumn(fields []string) bool {
	for _, h := range fields {
		if t.column(h) >= 0 {
			return true
		}
	}
	return false
}

func (t *Reader) column(name string) int {
	for k, c := range t.f.Columns {
		if c.Name == name {
			return k
		}
	}
	return -1
}

// useOrder sets the columns of a headerless table: the format's, in order.
func (t *Reader) useOrder(n int) {
	t.cols = make([]int, len(t.f.Columns))
	t.header = make([]string, n)
	t.min = 0
	for k, c := range t.f.Columns {
		t.cols[k] = k
		t.header[k] = c.Name
		if !c.Optional {
			t.min = k + 1
		}
	}
}

func (t *Reader) readHeader(fields []string) error {
	t.cols = make([]int, len(t.f.Columns))
	for k := range t.cols {
		t.cols[k] = -1
	}
	for i, h := range fields {
		k := t.column(h)
		if k < 0 || t.cols[k] >= 0 {
			return &Error{Line: t.line, Msg: fmt.Sprintf("header column %q: want %s, once each", h, t.want())}
		}
		t.cols[k] = i
		if !t.f.Columns[k].Optional {
			t.min = max(t.min, i+1)
		}
	}
	for k, c := range t.f.Columns {
		if !c.Optional && t.cols[k] < 0 {
			return &Error{Line: t.line, Msg: fmt.Sprintf("header %q lacks column %q", strings.Join(fields, ","), c.Name)}
		}
	}
	t.header = append([]string(nil), fields...)
	return nil
}

// Has reports whether the table has the column (in its header, or every
// column of a headerless table).
func (t *Reader) Has(name string) bool {
	k := t.column(name)
	return k >= 0 && t.cols[k] >= 0
}

// Line is the number of the line last read (1 is the first).
func (t *Reader) Line() int { return t.line }

// Next reads the next row; io.EOF after the last. The Row is reused by
// the next call: keep its values, not it.
func (t *Reader) Next() (*Row, error) {
	var fields []string
	if t.first != nil {
		fields, t.first = t.first, nil
	} else {
		if t.eof {
			return nil, io.EOF
		}
		var err error
		if fields, err = t.nextLine(); err != nil {
			if err == io.EOF {
				t.eof = true
			}
			return nil, err
		}
	}
	if len(fields) < t.min || len(fields) > len(t.header) {
		want := strconv.Itoa(len(t.header))
		switch {
		case t.min == len(t.header)-1:
			want = fmt.Sprintf("%d or %d", t.min, len(t.header))
		case t.min < len(t.header):
			want = fmt.Sprintf("%d to %d", t.min, len(t.header))
		}
		return nil, &Error{Line: t.line, Msg: fmt.Sprintf("%d fields, want %s (%s)", len(fields), want, strings.Join(t.header, ","))}
	}
	t.row = Row{t: t, line: t.line, fields: fields}
	return &t.row, nil
}

// nextLine reads the next line holding a row or a header and splits it;
// io.EOF at the end of the input.
func (t *Reader) nextLine() ([]string, error) {
	for t.sc.Scan() {
		t.line++
		text := t.sc.Text()
		if t.line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		text = strings.TrimSuffix(text, "\r")
		if len(text) > t.maxLine() {
			return nil, &Error{Line: t.line, Msg: fmt.Sprintf("longer than %d bytes", t.maxLine())}
		}
		trimmed := strings.TrimSpace(text)
		if trimmed == "" || (t.f.Comments && trimmed[0] == '#') {
			continue
		}
		fields, err := split(t.buf[:0], text)
		if err != nil {
			return nil, &Error{Line: t.line, Msg: err.Error()}
		}
		t.buf = fields
		return fields, nil
	}
	if err := t.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{Line: t.line + 1, Msg: fmt.Sprintf("longer than %d bytes", t.maxLine())}
		}
		return nil, &Error{Msg: err.Error()}
	}
	return nil, io.EOF
}

func (t *Reader) maxLine() int {
	if t.f.MaxLine <= 0 {
		return DefaultMaxLine
	}
	return t.f.MaxLine
}

// split appends the trimmed fields of a line to fields; a field may be
// quoted.
func split(fields []string, line string) ([]string, error) {
	for {
		s := strings.TrimLeft(line, " \t")
		if !strings.HasPrefix(s, `"`) {
			f, rest, more := strings.Cut(line, ",")
			if strings.Contains(f, `"`) {
				return nil, fmt.Errorf("a quote inside the unquoted field %q", strings.TrimSpace(f))
			}
			fields = append(fields, strings.TrimSpace(f))
			if !more {
				return fields, nil
			}
			line = rest
			continue
		}
		var b strings.Builder
		s = s[1:]
		for {
			i := strings.IndexByte(s, '"')
			if i < 0 {
				return nil, fmt.Errorf("unterminated quoted field (a field may not span lines)")
			}
			b.WriteString(s[:i])
			s = s[i+1:]
			if strings.HasPrefix(s, `"`) {
				b.WriteByte('"')
				s = s[1:]
				continue
			}
			break
		}
		f := b.String()
		s = strings.TrimLeft(s, " \t")
		fields = append(fields, strings.TrimSpace(f))
		if s == "" {
			return fields, nil
		}
		if s[0] != ',' {
			return nil, fmt.Errorf("text after the quoted field %q", f)
		}
		line = s[1:]
	}
}

// Row is one row of a table.
type Row struct {
	t      *Reader
	line   int
	fields []string
}

// Line is the row's line in the file.
func (r *Row) Line() int { return r.line }

// String is the field of the column, trimmed; "" when the table lacks the
// column or the row leaves it out.
func (r *Row) String(name string) string {
	k := r.t.column(name)
	if k < 0 || r.t.cols[k] < 0 || r.t.cols[k] >= len(r.fields) {
		return ""
	}
	return r.fields[r.t.cols[k]]
}

// Int is the column's field as an integer in [lo, hi], or an error naming
// the line, the column and the value.
func (r *Row) Int(name string, lo, hi int64) (int64, error) {
	s := r.String(name)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, r.Errorf("%s %q: want an integer in [%d, %d]", name, s, lo, hi)
	}
	return v, nil
}

// Float is the column's field as a finite number in [lo, hi], or an
// error naming the line, the column and the value.
func (r *Row) Float(name string, lo, hi float64) (float64, error) {
	s := r.String(name)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
		return 0, r.Errorf("%s %q: want a number in [%g, %g]", name, s, lo, hi)
	}
	return v, nil
}

// Errorf is an *Error on the row's line.
func (r *Row) Errorf(format string, args ...any) error {
	return &Error{Line: r.line, Msg: fmt.Sprintf(format, args...)}
}
