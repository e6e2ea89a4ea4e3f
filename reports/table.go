package reports

import (
	"encoding/json"
	"fmt"
	"time"
)

// Table is a titled grid of values under typed columns. Cells keep their
// values (not text): text and markdown format them per column, JSON and
// CSV keep them exact.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]any
	// Constants are values that hold for every row, said once above the
	// table instead of in a column that never changes.
	Constants []Constant
	// Notes are numbered notes printed under the table.
	Notes []string
}

// Constant is one value said above a table.
type Constant struct {
	Column Column
	Value  any
}

// Row appends a row: one value per column. A row of another length is a
// programming error and panics.
func (t *Table) Row(cells ...any) {
	if len(cells) != len(t.Columns) {
		panic(fmt.Sprintf("reports: table %q: row of %d cells for %d columns", t.Title, len(cells), len(t.Columns)))
	}
	t.Rows = append(t.Rows, cells)
}

// Constant says once, above the table, a value that holds for every row:
// what a column that never changes would show.
func (t *Table) Constant(c Column, v any) {
	t.Constants = append(t.Constants, Constant{Column: c, Value: v})
}

// Note appends a numbered note printed under the table.
func (t *Table) Note(format string, args ...any) {
	t.Notes = append(t.Notes, fmt.Sprintf(format, args...))
}

// tableJSON is a table in the report's JSON: the columns' names, their
// units ("bytes", "s", "ratio", "fraction" or ""), and the rows' exact
// values.
type tableJSON struct {
	Title     string   `json:"title"`
	Columns   []string `json:"columns"`
	Units     []string `json:"units"`
	Rows      [][]any  `json:"rows"`
	Constants Values   `json:"constants,omitzero"`
	Notes     []string `json:"notes,omitempty"`
	// Format is every column as the text shows it, so that a table read
	// back (from another process's report) prints as it did.
	Format []Column `json:"format,omitempty"`
}

// MarshalJSON writes the table with exact values.
func (t *Table) MarshalJSON() ([]byte, error) {
	j := tableJSON{Title: t.Title, Columns: []string{}, Units: []string{}, Rows: [][]any{}, Notes: t.Notes, Format: t.Columns}
	for _, c := range t.Columns {
		j.Columns = append(j.Columns, c.Name)
		j.Units = append(j.Units, c.UnitName())
	}
	for _, row := range t.Rows {
		out := make([]any, len(row))
		for i, v := range row {
			out[i] = t.Columns[i].Raw(v)
		}
		j.Rows = append(j.Rows, out)
	}
	for _, c := range t.Constants {
		j.Constants.Set(c.Column.Name, c.Column.Raw(c.Value))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a table written by MarshalJSON. The columns' kinds
// come back from their units (bytes, ratios, fractions; durations as
// seconds); numbers come back as float64.
func (t *Table) UnmarshalJSON(b []byte) error {
	var j tableJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = Table{Title: j.Title, Rows: j.Rows, Notes: j.Notes}
	for i, name := range j.Columns {
		c := Text(name)
		unit := ""
		if i < len(j.Units) {
			unit = j.Units[i]
		}
		switch unit {
		case "bytes":
			c = Bytes(name)
		case "ratio":
			c = Ratio(name)
		case "fraction":
			c = Percent(name, 1)
		case "s":
			c = Float(name, 3)
		}
		t.Columns = append(t.Columns, c)
	}
	if len(j.Format) == len(t.Columns) {
		t.Columns = j.Format
		for _, row := range t.Rows { // durations come back as seconds
			for i, v := range row {
				if f, ok := v.(float64); ok && t.Columns[i].Kind == DurationKind {
					row[i] = time.Duration(f * float64(time.Second))
				}
			}
		}
	}
	for _, k := range j.Constants.Keys() {
		v, _ := j.Constants.Get(k)
		t.Constants = append(t.Constants, Constant{Column: Text(k), Value: v})
	}
	return nil
}

// formatted is a table's cells as text, one string per cell; brief marks
// the cells that text output shortens to one line.
type formatted struct {
	title   string
	headers []string
	numeric []bool
	cells   [][]string
	brief   [][]bool
	consts  []string // "name = value"
	notes   []string
}

// format formats every cell. With hoist, in a table of two rows or more, a
// column whose cells are equal in every row moves into the constants
// ("outside = 4 B"), and so does a column that repeats an earlier one
// ("arena = bound").
func (t *Table) format(hoist bool) formatted {
	f := formatted{title: t.Title, notes: t.Notes}
	for _, c := range t.Constants {
		f.consts = append(f.consts, c.Column.Header()+" = "+c.Column.Format(c.Value))
	}
	keep := make([]bool, len(t.Columns))
	cells := make([][]string, len(t.Rows))
	for i, row := range t.Rows {
		cells[i] = make([]string, len(row))
		for j, v := range row {
			cells[i][j] = clean(t.Columns[j].Format(v))
		}
	}
	kept := 0
	for j := range t.Columns {
		keep[j] = !hoist || len(t.Rows) < 2 || len(t.Columns) == 1
		for i := 1; i < len(cells) && !keep[j]; i++ {
			keep[j] = cells[i][j] != cells[0][j]
		}
		if keep[j] {
			kept++
		}
	}
	if kept == 0 {
		keep[0] = true // identical rows: still show one column of them
	}
	same := make([]int, len(t.Columns)) // same[j] = i+1: column j repeats column i
	for j := range t.Columns {
		for i := 0; i < j && keep[j] && hoist && len(t.Rows) >= 2; i++ {
			if keep[i] && equalColumns(cells, i, j) {
				keep[j], same[j] = false, i+1
			}
		}
	}
	for j, c := range t.Columns {
		if !keep[j] {
			value := cells[0][j]
			if same[j] > 0 {
				value = t.Columns[same[j]-1].Header()
			}
			f.consts = append(f.consts, c.Header()+" = "+value)
			continue
		}
		f.headers = append(f.headers, c.Header())
		f.numeric = append(f.numeric, c.numeric())
	}
	for i, row := range t.Rows {
		var out []string
		var short []bool
		for j, v := range row {
			if keep[j] {
				_, b := v.(brief)
				out = append(out, cells[i][j])
				short = append(short, b)
			}
		}
		f.cells = append(f.cells, out)
		f.brief = append(f.brief, short)
	}
	return f
}

// equalColumns reports whether columns i and j hold the same text in every row.
func equalColumns(cells [][]string, i, j int) bool {
	for _, row := range cells {
		if row[i] != row[j] {
			return false
		}
	}
	return true
}
