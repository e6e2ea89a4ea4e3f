package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestColumnFormat(t *testing.T) {
	tests := []struct {
		col  Column
		in   any
		want string
	}{
		{Text("t"), "best-fit", "best-fit"},
		{Text("t"), true, "yes"},
		{Text("t"), 1.23456, "1.235"},
		{Int("n"), 1536, "1536"},
		{Int("n"), int64(-3), "-3"},
		{Int("n"), 5526.4, "5526"},
		{Int("n"), uint64(7), "7"},
		{Float("x", 4), 1.5, "1.5000"},
		{Float("x", 0), 2.5, "2"}, // strconv rounds half to even
		{Float("x", 2), math.NaN(), Missing},
		{Float("x", 2), nil, Missing},
		{Float("x", 2), "-", "-"},
		{Significant("d", 2), 1.1920929e-07, "1.2e-07"},
		{Significant("d", 2), 0.0, "0"},
		{Bytes("b"), 768, "768 B"},
		{Bytes("b"), 1536, "1.5 KiB"},
		{Bytes("b"), int64(12145664), "11.58 MiB"},
		{Bytes("b"), 192 << 20, "192 MiB"},
		{Bytes("b"), int64(3) << 30, "3 GiB"},
		{Bytes("b"), 3.962e7, "37.78 MiB"},
		{Bytes("b"), -2048, "-2 KiB"},
		{Bytes("b"), 0, "0 B"},
		{Duration("d", time.Millisecond, 3), 52 * time.Microsecond, "0.052"},
		{Duration("d", time.Second, 1), 1500 * time.Millisecond, "1.5"},
		{Ratio("r"), 1.0, "1.000"},
		{Ratio("r"), 2.5134, "2.513"},
		{Ratio("r"), math.NaN(), Missing},
		{Percent("p", 1), 1.0 / 3, "33.3%"},
	}
	for _, tc := range tests {
		if got := tc.col.Format(tc.in); got != tc.want {
			t.Errorf("%v column Format(%v) = %q, want %q", tc.col.Kind, tc.in, got, tc.want)
		}
	}
	if h := Duration("step", time.Millisecond, 2).Header(); h != "step (ms)" {
		t.Errorf("Duration header = %q, want %q", h, "step (ms)")
	}
}

func TestColumnRaw(t *testing.T) {
	tests := []struct {
		col  Column
		in   any
		want any
	}{
		{Bytes("b"), 12145664, int64(12145664)},
		{Duration("d", time.Millisecond, 3), 1500 * time.Millisecond, 1.5},
		{Float("x", 2), 1.23456, 1.23456},
		{Float("x", 2), math.NaN(), nil},
		{Percent("p", 1), 0.25, 0.25},
		{Text("t"), "x", "x"},
		{Text("t"), brief("long"), "long"},
	}
	for _, tc := range tests {
		if got := tc.col.Raw(tc.in); got != tc.want {
			t.Errorf("Raw(%v) = %v (%T), want %v (%T)", tc.in, got, got, tc.want, tc.want)
		}
	}
}

func typedReport() *Report {
	r := New("demo", "typed")
	tb := r.AddTable("Sizes", Text("config"), Bytes("arena"), Duration("step", time.Millisecond, 2), Ratio("arena/naive"))
	tb.Row("tiny", 193152, 1230*time.Microsecond, 0.398)
	tb.Row("small", int64(12145664), 13410*time.Microsecond, 0.46)
	tb.Constant(Bytes("outside"), 4)
	return r
}

// TestExactValuesInJSONAndCSV: bytes are counts and durations seconds in
// JSON and CSV, whatever text shows.
func TestExactValuesInJSONAndCSV(t *testing.T) {
	r := typedReport()
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var j struct {
		Tables []struct {
			Columns   []string
			Units     []string
			Rows      [][]any
			Constants map[string]any
		}
	}
	if err := json.Unmarshal(b.Bytes(), &j); err != nil {
		t.Fatal(err)
	}
	tb := j.Tables[0]
	if got := strings.Join(tb.Units, ","); got != ",bytes,s,ratio" {
		t.Errorf("units = %q, want %q", got, ",bytes,s,ratio")
	}
	if tb.Rows[1][1] != 12145664.0 || tb.Rows[1][2] != 0.01341 || tb.Constants["outside"] != 4.0 {
		t.Errorf("JSON row %v, constants %v: want 12145664 bytes, 0.01341 s, outside 4", tb.Rows[1], tb.Constants)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("the JSON report does not read back: %v", err)
	}
	if back.Tables[0].Columns[1].Kind != BytesKind || back.Tables[0].Rows[0][1] != 193152.0 {
		t.Errorf("read back: column %+v, cell %v", back.Tables[0].Columns[1], back.Tables[0].Rows[0][1])
	}

	b.Reset()
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range recs {
		if rec[0] == "Sizes" && rec[1] == "small" && rec[2] == "arena" {
			found = rec[3] == "12145664" && rec[4] == "bytes"
		}
	}
	if !found {
		t.Errorf("CSV lacks the exact arena bytes of small:\n%v", recs)
	}

	b.Reset()
	r.WriteText(&b)
	for _, want := range []string{"11.58 MiB", "13.41", "step (ms)", "In every row: outside = 4 B"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "12145664") {
		t.Errorf("text shows the raw byte count:\n%s", b.String())
	}
}

func TestRowOfWrongLengthPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Row with 1 cell for 2 columns did not panic")
		}
	}()
	New("demo", "x").AddTable("t", Text("a"), Int("b")).Row("only one")
}

func TestCellLists(t *testing.T) {
	if got := Cell([]string{"tiny", "small"}); got != "tiny,small" {
		t.Errorf("Cell(list) = %q, want tiny,small", got)
	}
	if got := Cell([]int64{1, 2}); got != "1,2" {
		t.Errorf("Cell([]int64) = %q, want 1,2", got)
	}
}
