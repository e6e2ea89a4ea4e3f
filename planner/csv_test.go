package planner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name, in string
		want     string // error fragment, "" for success
	}{
		{"minimal", "id,lower,upper,size\nb1,0,3,4\n", ""},
		{"byte order mark", "\ufeffid,lower,upper,size\nb1,0,3,4\n", ""},
		{"offset column", "id,lower,upper,size,offset\nb1,0,3,4,8\n", ""},
		{"columns in another order", "size,id,upper,lower\n4,b1,3,0\n", ""},
		{"empty file", "", "empty file"},
		{"missing header", "b1,0,3,4\n", `header column "b1"`},
		{"header lacks size", "id,lower,upper\nb1,0,3\n", `lacks column "size"`},
		{"duplicate column", "id,lower,upper,size,size\nb1,0,3,4,4\n", `header column "size"`},
		{"no rows", "id,lower,upper,size\n", "no buffers"},
		{"short row", "id,lower,upper,size\nb1,0,3\n", "line 2"},
		{"not a number", "id,lower,upper,size\nb1,0,x,4\n", `line 2: upper "x"`},
		{"zero size", "id,lower,upper,size\nb1,0,3,4\nb2,0,3,0\n", `line 3: size "0"`},
		{"negative size", "id,lower,upper,size\nb1,0,3,-4\n", `line 2: size "-4"`},
		{"huge size", "id,lower,upper,size\nb1,0,3,99999999999999999\n", `size "99999999999999999"`},
		{"upper equal lower", "id,lower,upper,size\nb1,3,3,4\n", "line 2: id \"b1\": upper 3 <= lower 3"},
		{"upper below lower", "id,lower,upper,size\nb1,5,3,4\n", "upper 3 <= lower 5"},
		{"duplicate id", "id,lower,upper,size\nb1,0,3,4\nb1,3,5,4\n", `line 3: id "b1" already used on line 2`},
		{"empty id", "id,lower,upper,size\n,0,3,4\n", "line 2: empty id"},
		{"negative offset", "id,lower,upper,size,offset\nb1,0,3,4,-1\n", `offset "-1"`},
		{"CRLF", "id,lower,upper,size\r\nb1,0,3,4\r\n", ""},
		{"padded header", "\ufeff id , size,lower,upper\r\nb1,4,0,3\r\n", ""},
		{"blank lines", "id,lower,upper,size\n\nb1,0,3,4\n  \n", ""},
		// the messages are the serving trace reader's (one reader, internal/csvtable)
		{"short row says what it wants", "id,lower,upper,size\nb1,0,3\n", "line 2: 3 fields, want 4 (id,lower,upper,size)"},
		{"unterminated quote", "id,lower,upper,size\n\"b1,0,3,4\n", "line 2: unterminated quoted field"},
		{"text after a quote", "id,lower,upper,size\n\"b1\"x,0,3,4\n", `line 2: text after the quoted field "b1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ReadCSV(strings.NewReader(tc.in))
			if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrCSV) || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ReadCSV(%q) = %v, want %q", tc.in, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
		})
	}
}

func TestCSVRoundTrip(t *testing.T) {
	f, err := os.Open("testdata/example.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs, offs, err := ReadCSV(f)
	if err != nil || offs != nil || len(bufs) != 4 || bufs[3].ID != "x, loaded" {
		t.Fatalf("ReadCSV(example) = %v, offsets %v, %v; want 4 buffers, the last with a quoted id", bufs, offs, err)
	}
	pl := mustRun(t, "best-fit", Problem{Buffers: bufs, Alignment: 1})
	var out bytes.Buffer
	if err := WriteCSV(&out, bufs, pl.Offsets); err != nil {
		t.Fatal(err)
	}
	back, offs, err := ReadCSV(&out)
	if err != nil || !slices.Equal(back, bufs) || !slices.Equal(offs, pl.Offsets) {
		t.Errorf("round trip = %v %v %v, want %v %v", back, offs, err, bufs, pl.Offsets)
	}
}

func FuzzReadCSV(f *testing.F) {
	seed, _ := os.ReadFile("testdata/example.csv")
	f.Add(string(seed))
	f.Add("id,lower,upper,size,offset\na,0,1,8,0\nb,0,1,8,8\n")
	f.Add("id,lower,upper,size\n\"q,uoted\",0,3,4\n")
	f.Add("id,lower,upper,size\nb1,5,3,4\n")
	f.Add("size,id\n")
	f.Fuzz(func(t *testing.T, in string) {
		bufs, offs, err := ReadCSV(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrCSV) {
				t.Fatalf("error %v does not wrap ErrCSV", err)
			}
			return
		}
		p := Problem{Buffers: bufs, Alignment: 1}
		if err := p.Validate(); err != nil {
			t.Fatalf("ReadCSV accepted an invalid problem: %v", err)
		}
		var out bytes.Buffer
		if err := WriteCSV(&out, bufs, offs); err != nil {
			t.Fatal(err)
		}
		back, offs2, err := ReadCSV(&out)
		if err != nil || !slices.Equal(back, bufs) || !slices.Equal(offs, offs2) {
			t.Fatalf("round trip changed the buffers: %v %v", back, err)
		}
		if len(bufs) <= 200 && p.Naive() <= 1<<24 { // small enough to simulate
			if _, err := bestFitAlgorithm.Run(context.Background(), p); err != nil {
				t.Fatalf("best-fit on read buffers: %v", err)
			}
		}
	})
}

// TestMiniMallocInstances plans MiniMalloc's 11 challenging instances with
// best-fit and greedy-by-size; every plan must verify and respect the bound.
func TestMiniMallocInstances(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testutil.Shared(t), "data", "minimalloc", "*.1048576.csv"))
	if len(files) != 11 {
		t.Fatalf("found %d MiniMalloc instances, want 11", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bufs, _, err := ReadCSV(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			p := Problem{Buffers: bufs, Alignment: 1}
			for _, name := range []string{"best-fit", "greedy-by-size"} {
				pl := mustRun(t, name, p)
				if pl.Peak < p.Bound() {
					t.Errorf("%s peak %d below the bound %d", name, pl.Peak, p.Bound())
				}
				t.Logf("%s: peak %d = %.3f of 1048576, bound %d", name, pl.Peak, float64(pl.Peak)/1048576, p.Bound())
			}
		})
	}
}
