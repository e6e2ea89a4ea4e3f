package serving

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// A trace is a CSV file of requests, one a line:
//
//	arrival_s,prompt_tokens,output_tokens[,cancel_s]
//
// arrival_s is the arrival time in seconds (any order; ties keep file
// order), prompt_tokens and output_tokens are whole numbers of at least 1
// (output_tokens is the request's max_tokens), and the optional cancel_s is
// the time in seconds the client cancels, later than arrival_s (empty: it
// never does). A header line naming the columns may come first; blank
// lines and lines starting with # are skipped.

// ErrTrace marks a malformed trace; the message names the line.
var ErrTrace = errors.New("bad trace")

// maxTraceLine bounds a line of a trace, so a file without newlines cannot
// exhaust memory.
const maxTraceLine = 4096

// ReadTrace reads a trace. Request IDs are the rows' order, from 0.
func ReadTrace(r io.Reader) ([]Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxTraceLine)
	var reqs []Request
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimSuffix(sc.Text(), "\r"))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if len(reqs) == 0 && fields[0] == "arrival_s" {
			if !isTraceHeader(fields) {
				return nil, fmt.Errorf("%w: line %d: header %q: want arrival_s,prompt_tokens,output_tokens[,cancel_s]", ErrTrace, line, text)
			}
			continue
		}
		req, err := traceRow(fields)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrTrace, line, err)
		}
		req.ID = len(reqs)
		reqs = append(reqs, req)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: line %d: longer than %d bytes", ErrTrace, line+1, maxTraceLine)
		}
		return nil, fmt.Errorf("%w: %v", ErrTrace, err)
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%w: no requests", ErrTrace)
	}
	return reqs, nil
}

var traceColumns = []string{"arrival_s", "prompt_tokens", "output_tokens", "cancel_s"}

func isTraceHeader(fields []string) bool {
	if len(fields) < 3 || len(fields) > 4 {
		return false
	}
	for i, f := range fields {
		if f != traceColumns[i] {
			return false
		}
	}
	return true
}

func traceRow(fields []string) (Request, error) {
	if len(fields) < 3 || len(fields) > 4 {
		return Request{}, fmt.Errorf("%d fields, want 3 or 4 (arrival_s,prompt_tokens,output_tokens[,cancel_s])", len(fields))
	}
	seconds := func(name, s string) (float64, error) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e9 {
			return 0, fmt.Errorf("%s %q is not a time in seconds in [0, 1e9]", name, s)
		}
		return v, nil
	}
	tokens := func(name, s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > maxLength {
			return 0, fmt.Errorf("%s %q is not a whole number in [1, %d]", name, s, maxLength)
		}
		return v, nil
	}
	var r Request
	var err error
	if r.Arrival, err = seconds("arrival_s", fields[0]); err != nil {
		return r, err
	}
	if r.Prompt, err = tokens("prompt_tokens", fields[1]); err != nil {
		return r, err
	}
	if r.Output, err = tokens("output_tokens", fields[2]); err != nil {
		return r, err
	}
	if len(fields) == 4 && fields[3] != "" {
		if r.Cancel, err = seconds("cancel_s", fields[3]); err != nil {
			return r, err
		}
		if r.Cancel <= r.Arrival {
			return r, fmt.Errorf("cancel_s %s is not later than arrival_s %s", fields[3], fields[0])
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
