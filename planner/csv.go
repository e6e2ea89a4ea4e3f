package planner

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"

	"gptlab/internal/csvtable"
)

// This file reads and writes MiniMalloc's CSV format: a header
// `id,lower,upper,size` (optionally with `offset`), then one buffer a line,
// live over the half-open [lower, upper), size bytes. Ids are any strings.

// MaxCSVSize bounds a size or offset read from a file (1 TiB), so sums of
// a million of them cannot overflow.
const MaxCSVSize = 1 << 40

// ErrCSV marks a malformed planning file.
var ErrCSV = errors.New("bad planning CSV")

var csvColumns = []string{"id", "lower", "upper", "size"}

// csvFormat is MiniMalloc's CSV, read with the reader the serving traces
// use (internal/csvtable): BOM, CRLF, columns by name in any order.
var csvFormat = csvtable.Format{Columns: []csvtable.Column{
	{Name: "id"}, {Name: "lower"}, {Name: "upper"}, {Name: "size"}, {Name: "offset", Optional: true},
}}

// ReadCSV reads buffers, and their offsets when the file has an `offset`
// column (else offsets is nil). The header names the columns in any
// order (a UTF-8 byte-order mark and CRLF line ends are accepted); a
// malformed file gives one error naming the line, the column and the
// value at fault.
func ReadCSV(r io.Reader) (bufs []Buffer, offsets []int64, err error) {
	t, err := csvtable.NewReader(r, csvFormat)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCSV, err)
	}
	hasOffset := t.Has("offset")
	seen := map[string]int{}
	for {
		row, err := t.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrCSV, err)
		}
		if bufs, offsets, err = appendBuffer(bufs, offsets, row, hasOffset, seen); err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrCSV, err)
		}
	}
	if len(bufs) == 0 {
		return nil, nil, fmt.Errorf("%w: no buffers after the header", ErrCSV)
	}
	return bufs, offsets, nil
}

// appendBuffer appends the buffer of one row (and its offset).
func appendBuffer(bufs []Buffer, offsets []int64, row *csvtable.Row, hasOffset bool, seen map[string]int) ([]Buffer, []int64, error) {
	var b Buffer
	var err error
	b.ID = row.String("id")
	if b.ID == "" {
		return nil, nil, row.Errorf("empty id")
	}
	if first, dup := seen[b.ID]; dup {
		return nil, nil, row.Errorf("id %q already used on line %d", b.ID, first)
	}
	seen[b.ID] = row.Line()
	if b.Start, err = row.Int("lower", -MaxCSVSize, MaxCSVSize); err != nil {
		return nil, nil, err
	}
	if b.End, err = row.Int("upper", -MaxCSVSize, MaxCSVSize); err != nil {
		return nil, nil, err
	}
	if b.End <= b.Start {
		return nil, nil, row.Errorf("id %q: upper %d <= lower %d: the lifetime [lower, upper) is empty", b.ID, b.End, b.Start)
	}
	if b.Size, err = row.Int("size", 1, MaxCSVSize); err != nil {
		return nil, nil, err
	}
	if hasOffset {
		off, err := row.Int("offset", 0, MaxCSVSize)
		if err != nil {
			return nil, nil, err
		}
		offsets = append(offsets, off)
	}
	return append(bufs, b), offsets, nil
}

// WriteCSV writes buffers in MiniMalloc's format, with an offset column
// when offsets is not nil.
func WriteCSV(w io.Writer, bufs []Buffer, offsets []int64) error {
	if offsets != nil && len(offsets) != len(bufs) {
		return fmt.Errorf("WriteCSV: %d offsets for %d buffers", len(offsets), len(bufs))
	}
	cw := csv.NewWriter(w)
	header := csvColumns
	if offsets != nil {
		header = append(header[:len(header):len(header)], "offset")
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for i, b := range bufs {
		rec := []string{b.ID, strconv.FormatInt(b.Start, 10), strconv.FormatInt(b.End, 10), strconv.FormatInt(b.Size, 10)}
		if offsets != nil {
			rec = append(rec, strconv.FormatInt(offsets[i], 10))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
