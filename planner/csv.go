package planner

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
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

// ReadCSV reads buffers, and their offsets when the file has an `offset`
// column (else offsets is nil). A malformed file gives one error naming the
// line and the value at fault.
func ReadCSV(r io.Reader) (bufs []Buffer, offsets []int64, err error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, nil, fmt.Errorf("%w: empty file: want the header %s", ErrCSV, strings.Join(csvColumns, ","))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrCSV, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if _, dup := col[h]; dup || (h != "offset" && !slices.Contains(csvColumns, h)) {
			return nil, nil, fmt.Errorf("%w: line 1: header column %q: want %s and optionally offset, once each", ErrCSV, h, strings.Join(csvColumns, ","))
		}
		col[h] = i
	}
	for _, c := range csvColumns {
		if _, ok := col[c]; !ok {
			return nil, nil, fmt.Errorf("%w: line 1: header %q lacks column %q", ErrCSV, strings.Join(header, ","), c)
		}
	}
	_, hasOffset := col["offset"]
	seen := map[string]int{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %v", ErrCSV, err)
		}
		line, _ := cr.FieldPos(0)
		num := func(name string, lo, hi int64) (int64, error) {
			s := strings.TrimSpace(rec[col[name]])
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < lo || v > hi {
				return 0, fmt.Errorf("%w: line %d: %s %q: want an integer in [%d, %d]", ErrCSV, line, name, s, lo, hi)
			}
			return v, nil
		}
		var b Buffer
		b.ID = strings.TrimSpace(rec[col["id"]])
		if b.ID == "" {
			return nil, nil, fmt.Errorf("%w: line %d: empty id", ErrCSV, line)
		}
		if first, dup := seen[b.ID]; dup {
			return nil, nil, fmt.Errorf("%w: line %d: id %q already used on line %d", ErrCSV, line, b.ID, first)
		}
		seen[b.ID] = line
		if b.Start, err = num("lower", -MaxCSVSize, MaxCSVSize); err != nil {
			return nil, nil, err
		}
		if b.End, err = num("upper", -MaxCSVSize, MaxCSVSize); err != nil {
			return nil, nil, err
		}
		if b.End <= b.Start {
			return nil, nil, fmt.Errorf("%w: line %d: id %q: upper %d <= lower %d: the lifetime [lower, upper) is empty", ErrCSV, line, b.ID, b.End, b.Start)
		}
		if b.Size, err = num("size", 1, MaxCSVSize); err != nil {
			return nil, nil, err
		}
		if hasOffset {
			off, err := num("offset", 0, MaxCSVSize)
			if err != nil {
				return nil, nil, err
			}
			offsets = append(offsets, off)
		}
		b.ID = strings.Clone(b.ID) // ReuseRecord: keep no reference to the record
		bufs = append(bufs, b)
	}
	if len(bufs) == 0 {
		return nil, nil, fmt.Errorf("%w: no buffers after the header", ErrCSV)
	}
	return bufs, offsets, nil
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
