package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// labName is a report's lab as gptlab run takes it, or exit-gate.
var labName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// ReadReport reads a report written by WriteJSON (report.json) and checks
// what the renderers rely on: one JSON object and nothing after it, a lab
// name, every table row as long as its columns, every check's verdict one
// of pass, fail, inconclusive (and Pass true for pass alone), figures as
// file names. The error names the first thing wrong, on one line.
func ReadReport(data []byte) (*Report, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var r Report
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("not a report: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("not a report: more after its JSON object")
	}
	if err := r.valid(""); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *Report) valid(where string) error {
	if !labName.MatchString(r.Lab) {
		return fmt.Errorf("%slab %q: want a lab's name", where, r.Lab)
	}
	where += r.Lab + ": "
	for i, t := range r.Tables {
		if t == nil {
			return fmt.Errorf("%stable %d is null", where, i+1)
		}
		if len(t.Columns) == 0 && len(t.Rows) > 0 {
			return fmt.Errorf("%stable %q has rows and no columns", where, t.Title)
		}
		for j, row := range t.Rows {
			if len(row) != len(t.Columns) {
				return fmt.Errorf("%stable %q row %d: %d cells for %d columns", where, t.Title, j+1, len(row), len(t.Columns))
			}
		}
	}
	for _, c := range r.Checks {
		switch c.Verdict {
		case "":
		case Pass, Fail, Inconclusive:
			if c.Pass != (c.Verdict == Pass) {
				return fmt.Errorf("%scheck %q: pass %v with verdict %s", where, c.Name, c.Pass, c.Verdict)
			}
		default:
			return fmt.Errorf("%scheck %q: verdict %q (want pass, fail or inconclusive)", where, c.Name, c.Verdict)
		}
	}
	for _, f := range r.Figures {
		if f == "" || strings.ContainsAny(f, `/\`) || f == "." || f == ".." {
			return fmt.Errorf("%sfigure %q: want a file name", where, f)
		}
	}
	for i, sub := range r.Reports {
		if sub == nil {
			return fmt.Errorf("%sreport %d is null", where, i+1)
		}
		if err := sub.valid(where); err != nil {
			return err
		}
	}
	return nil
}
