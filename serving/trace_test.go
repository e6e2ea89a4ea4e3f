package serving

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestReadTrace(t *testing.T) {
	in := "arrival_s,prompt_tokens,output_tokens,cancel_s\n# a comment\n0,12,5,\n0.5,100,20,3.25\n\n0.25, 7 ,1\n"
	reqs, err := ReadTrace(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{{ID: 0, Arrival: 0, Prompt: 12, Output: 5}, {ID: 1, Arrival: 0.5, Prompt: 100, Output: 20, Cancel: 3.25}, {ID: 2, Arrival: 0.25, Prompt: 7, Output: 1}}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i := range want {
		if r := reqs[i]; r.ID != want[i].ID || r.Arrival != want[i].Arrival || r.Prompt != want[i].Prompt || r.Output != want[i].Output || r.Cancel != want[i].Cancel {
			t.Errorf("request %d = %+v, want %+v", i, r, want[i])
		}
	}
}

func TestReadTraceNamesTheBadLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"0,1,1\n0,x,3\n", "line 2: prompt_tokens \"x\""},
		{"0,1\n", "line 1: 2 fields"},
		{"-1,1,1\n", "line 1: arrival_s \"-1\""},
		{"0,1,0\n", "line 1: output_tokens \"0\""},
		{"2,1,1,1\n", "line 1: cancel_s 1 is not later"},
		{"# only comments\n\n", "no requests"},
		{"arrival_s,prompt_tokens\n", "line 1: header"},
		{"0,1,1,2,3\n", "line 1: 5 fields"},
		{"0,1,1,NaN\n", "line 1: cancel_s \"NaN\""},
		{strings.Repeat("1", 5000) + "\n", "line 1: longer than"},
	}
	for _, tc := range cases {
		_, err := ReadTrace(strings.NewReader(tc.in))
		if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadTrace(%.30q) = %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}

func FuzzReadTrace(f *testing.F) {
	for _, s := range []string{"0,12,5\n", "arrival_s,prompt_tokens,output_tokens\n1.5,3,4,9\n", "0,1,1,\n0.1,2,2,0.2\n", "0,1e3,1\n", "1e9,1,1\n", " 3 , 4 , 5 \r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		reqs, err := ReadTrace(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("error not ErrTrace: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := WriteTrace(&buf, reqs); err != nil {
			t.Fatal(err)
		}
		back, err := ReadTrace(&buf)
		if err != nil {
			t.Fatalf("written trace does not read back: %v\n%s", err, buf.String())
		}
		if len(back) != len(reqs) {
			t.Fatalf("%d requests back from %d", len(back), len(reqs))
		}
		for i := range reqs {
			a, b := reqs[i], back[i]
			if a.Arrival != b.Arrival || a.Prompt != b.Prompt || a.Output != b.Output || a.Cancel != b.Cancel || a.Validate() != nil {
				t.Fatalf("request %d: %+v back as %+v", i, a, b)
			}
		}
	})
}

// TestReadTraceHeaderByName: a trace's header is read as gptlab plan reads
// its CSV's (one reader, internal/csvtable): a UTF-8 byte-order mark is
// stripped, columns are found by name in any order, CRLF line ends are
// accepted. The trace reader once failed on "\ufeffarrival_s" and read a
// header in another order as data.
func TestReadTraceHeaderByName(t *testing.T) {
	want := []Request{{ID: 0, Arrival: 0.5, Prompt: 12, Output: 5}, {ID: 1, Arrival: 1, Prompt: 3, Output: 4, Cancel: 2}}
	for _, tc := range []struct{ name, in string }{
		{"plain", "arrival_s,prompt_tokens,output_tokens,cancel_s\n0.5,12,5,\n1,3,4,2\n"},
		{"byte order mark", "\ufeffarrival_s,prompt_tokens,output_tokens,cancel_s\n0.5,12,5,\n1,3,4,2\n"},
		{"another order", "output_tokens,cancel_s,prompt_tokens,arrival_s\n5,,12,0.5\n4,2,3,1\n"},
		{"CRLF", "arrival_s,prompt_tokens,output_tokens,cancel_s\r\n0.5,12,5,\r\n1,3,4,2\r\n"},
		{"all three", "\ufeff prompt_tokens , arrival_s,cancel_s,output_tokens\r\n12,0.5,,5\r\n3,1,2,4\r\n"},
		{"headerless", "0.5,12,5\n1,3,4,2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs, err := ReadTrace(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(want) {
				t.Fatalf("%d requests, want %d", len(reqs), len(want))
			}
			for i := range want {
				if r := reqs[i]; r.ID != want[i].ID || r.Arrival != want[i].Arrival || r.Prompt != want[i].Prompt || r.Output != want[i].Output || r.Cancel != want[i].Cancel {
					t.Errorf("request %d = %+v, want %+v", i, reqs[i], want[i])
				}
			}
		})
	}
}

// TestTraceSaysWhatPlanSays: the same fault gives the same message from
// the trace reader as from gptlab plan's CSV reader (planner.ReadCSV), in
// the same words.
func TestTraceSaysWhatPlanSays(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"arrival_s,prompt_tokens,output_tokens,size\n0,1,1,1\n",
			`line 1: header column "size": want arrival_s,prompt_tokens,output_tokens and optionally cancel_s, once each`},
		{"arrival_s,prompt_tokens,prompt_tokens,output_tokens\n0,1,1,1\n", `line 1: header column "prompt_tokens": want`},
		{"output_tokens,arrival_s\n1,0\n", `line 1: header "output_tokens,arrival_s" lacks column "prompt_tokens"`},
		{"arrival_s,prompt_tokens,output_tokens\n0,x,1\n", `line 2: prompt_tokens "x": want an integer in [1, `},
		{"arrival_s,prompt_tokens,output_tokens\n0,1,1\n0,1\n", `line 3: 2 fields, want 3 (arrival_s,prompt_tokens,output_tokens)`},
		{"arrival_s,prompt_tokens,output_tokens\n\"0,1,1\n", `line 2: unterminated quoted field`},
	} {
		_, err := ReadTrace(strings.NewReader(tc.in))
		if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadTrace(%q) = %v, want one line with %q", tc.in, err, tc.want)
		}
	}
}
