package csvtable

import (
	"errors"
	"io"
	"strings"
	"testing"
)

var testFormat = Format{Columns: []Column{{Name: "a"}, {Name: "b"}, {Name: "c", Optional: true}}}

// rows reads every row of in as its fields a, b, c.
func rows(in string, f Format) ([][3]string, error) {
	t, err := NewReader(strings.NewReader(in), f)
	if err != nil {
		return nil, err
	}
	var out [][3]string
	for {
		r, err := t.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, [3]string{r.String("a"), r.String("b"), r.String("c")})
	}
}

func TestReader(t *testing.T) {
	headerless := testFormat
	headerless.HeaderOptional, headerless.Comments = true, true
	for _, tc := range []struct {
		name, in string
		f        Format
		want     string // the rows, "|" between them, or the error
	}{
		{"plain", "a,b,c\n1,2,3\n", testFormat, "1 2 3"},
		{"byte order mark and CRLF", "\ufeffa,b\r\n1,2\r\n", testFormat, "1 2 "},
		{"any order, padded", " c , a,b\n3,1,2\n", testFormat, "1 2 3"},
		{"optional left out at the end", "a,b,c\n1,2\n4,5,\n", testFormat, "1 2 |4 5 "},
		{"quoted", "a,b\n\"x, \"\"y\"\"\" , 2\n", testFormat, `x, "y" 2 `},
		{"blank lines", "a,b\n\n  \n1,2\n\n", testFormat, "1 2 "},
		{"no header", "1,2\n", headerless, "1 2 "},
		{"no header, comments", "# x\n1,2,3\n  # y\n4,5\n", headerless, "1 2 3|4 5 "},
		{"empty, header optional", "", headerless, ""},
		{"empty", "", testFormat, "empty file: want the header a,b and optionally c"},
		{"unknown column", "a,b,d\n", testFormat, `line 1: header column "d": want a,b and optionally c, once each`},
		{"twice", "a,b,a\n", testFormat, `line 1: header column "a": want a,b and optionally c, once each`},
		{"lacks", "\n\nb,c\n", testFormat, `line 3: header "b,c" lacks column "a"`},
		{"short row", "a,b,c\n1\n", testFormat, "line 2: 1 fields, want 2 or 3 (a,b,c)"},
		{"long row", "a,b\n1,2,3\n", testFormat, "line 2: 3 fields, want 2 (a,b)"},
		{"unterminated", "a,b\n\"1,2\n", testFormat, "line 2: unterminated quoted field (a field may not span lines)"},
		{"after quote", "a,b\n\"1\"2,3\n", testFormat, `line 2: text after the quoted field "1"`},
		{"bare quote", "a,b\n1\"2,3\n", testFormat, `line 2: a quote inside the unquoted field "1\"2"`},
		{"comment not allowed", "a,b\n#1,2\n", testFormat, "#1 2 "},
		{"too long", "a,b\n" + strings.Repeat("1", 100) + ",2\n", Format{Columns: testFormat.Columns, MaxLine: 50}, "line 2: longer than 50 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := rows(tc.in, tc.f)
			got := ""
			if err != nil {
				got = err.Error()
				var e *Error
				if !errors.As(err, &e) {
					t.Errorf("error %v is not an *Error", err)
				}
			} else {
				var parts []string
				for _, r := range rs {
					parts = append(parts, strings.Join(r[:], " "))
				}
				got = strings.Join(parts, "|")
			}
			if got != tc.want {
				t.Errorf("read %q = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestTypedFields(t *testing.T) {
	r, err := NewReader(strings.NewReader("a,b\n12,x\n1e3,NaN\n"), testFormat)
	if err != nil {
		t.Fatal(err)
	}
	row, _ := r.Next()
	if v, err := row.Int("a", 0, 20); v != 12 || err != nil {
		t.Errorf("Int(a) = %d, %v", v, err)
	}
	if _, err := row.Int("a", 0, 10); err == nil || err.Error() != `line 2: a "12": want an integer in [0, 10]` {
		t.Errorf("Int(a) out of range: %v", err)
	}
	if _, err := row.Float("b", 0, 1); err == nil || err.Error() != `line 2: b "x": want a number in [0, 1]` {
		t.Errorf("Float(b): %v", err)
	}
	row, _ = r.Next()
	if v, err := row.Float("a", 0, 1e9); v != 1000 || err != nil {
		t.Errorf("Float(a) = %v, %v", v, err)
	}
	if _, err := row.Float("b", 0, 1e9); err == nil || !strings.Contains(err.Error(), `line 3: b "NaN": want a number in [0, 1e+09]`) {
		t.Errorf("Float(NaN): %v", err)
	}
	if s := row.String("c"); s != "" || r.Has("c") {
		t.Errorf("absent column c: %q, Has %v", s, r.Has("c"))
	}
}

// FuzzReader: any input gives rows or one-line *Error, never a panic.
func FuzzReader(f *testing.F) {
	for _, s := range []string{"a,b,c\n1,2,3\n", "\ufeffc,a,b\r\n\"x\"\"\",1,\n", "1,2\n# c\n", "a,b\n\"", ""} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, in string, optional bool) {
		fm := testFormat
		fm.HeaderOptional, fm.Comments, fm.MaxLine = optional, optional, 64
		_, err := rows(in, fm)
		var e *Error
		if err != nil && (!errors.As(err, &e) || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("error %q: want one line, an *Error", err)
		}
	})
}
