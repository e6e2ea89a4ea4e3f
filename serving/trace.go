package serving

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"gptlab/internal/csvtable"
)

// A trace is a CSV file of requests, one a line:
//
//	arrival_s,prompt_tokens,output_tokens[,cancel_s]
//
// arrival_s is the arrival time in seconds (any order; ties keep file
// order), prompt_tokens and output_tokens are whole numbers of at least 1
// (output_tokens is the request's max_tokens), and the optional cancel_s is
// the time in seconds the client cancels, later than arrival_s (empty: it
// never does). A header line naming the columns may come first, in any
// order; without one the columns are in the order above. It is read as
// gptlab plan reads its CSV (internal/csvtable: a UTF-8 byte-order mark
// and CRLF line ends accepted, the same messages); blank lines and lines
// starting with # are skipped.

// ErrTrace marks a malformed trace; the message names the line.
var ErrTrace = errors.New("bad trace")

// maxTraceLine bounds a line of a trace, so a file without newlines cannot
// exhaust memory.
const maxTraceLine = 4096

var traceColumns = []string{"arrival_s", "prompt_tokens", "output_tokens", "cancel_s"}

var traceFormat = csvtable.Format{
	Columns:        []csvtable.Column{{Name: "arrival_s"}, {Name: "prompt_tokens"}, {Name: "output_tokens"}, {Name: "cancel_s", Optional: true}},
	HeaderOptional: true,
	Comments:       true,
	MaxLine:        maxTraceLine,
}

// TraceReader reads a trace one request at a time, holding one line, not
// the file.
type TraceReader struct {
	t *csvtable.Reader
	n int
}

// NewTraceReader reads through the header of the trace in r, if it has
// one. Errors wrap ErrTrace.
func NewTraceReader(r io.Reader) (*TraceReader, error) {
	t, err := csvtable.NewReader(r, traceFormat)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	return &TraceReader{t: t}, nil
}

// Next is the next request, its ID the number of requests before it; io.EOF
// after the last. Other errors wrap ErrTrace and name the line.
func (tr *TraceReader) Next() (Request, error) {
	row, err := tr.t.Next()
	if err == io.EOF {
		return Request{}, io.EOF
	}
	if err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	req, err := traceRow(row)
	if err != nil {
		return Request{}, fmt.Errorf("%w: %w", ErrTrace, err)
	}
	req.ID = tr.n
	tr.n++
	return req, nil
}

// ReadTrace reads a whole trace (with TraceReader). Request IDs are the
// rows' order, from 0.
func ReadTrace(r io.Reader) ([]Request, error) {
	tr, err := NewTraceReader(r)
	if err != nil {
		return nil, err
	}
	var reqs []Request
	for {
		req, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, req)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrTrace)
	}
	return reqs, nil
}

func traceRow(row *csvtable.Row) (Request, error) {
	var r Request
	var err error
	if r.Arrival, err = row.Float("arrival_s", 0, 1e9); err != nil {
		return r, err
	}
	p, err := row.Int("prompt_tokens", 1, maxLength)
	if err != nil {
		return r, err
	}
	o, err := row.Int("output_tokens", 1, maxLength)
	if err != nil {
		return r, err
	}
	r.Prompt, r.Output = int(p), int(o)
	if s := row.String("cancel_s"); s != "" {
		if r.Cancel, err = row.Float("cancel_s", 0, 1e9); err != nil {
			return r, err
		}
		if r.Cancel <= r.Arrival {
			return r, row.Errorf("cancel_s %s is not later than arrival_s %s", s, row.String("arrival_s"))
		}
	}
	return r, nil
}

// WriteTrace writes requests in the trace format ReadTrace reads, with a
// header; times are written exactly (shortest round-tripping decimal).
func WriteTrace(w io.Writer, reqs []Request) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, strings.Join(traceColumns, ","))
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, r := range reqs {
		cancel := ""
		if r.Cancels() {
			cancel = g(r.Cancel)
		}
		fmt.Fprintf(bw, "%s,%d,%d,%s\n", g(r.Arrival), r.Prompt, r.Output, cancel)
	}
	return bw.Flush()
}
