package models

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gptlab/internal/testutil"
)

func TestSplitSizes(t *testing.T) {
	for _, tc := range []struct {
		n, block, train, val int
	}{
		{100, 4, 90, 10},
		{1000, 16, 900, 100},
		{1001, 16, 900, 101},
		{179, 16, 161, 18},
	} {
		text := strings.Repeat("abcdefg", tc.n/7+1)[:tc.n]
		d, err := FromText(text, tc.block)
		if err != nil {
			t.Fatalf("FromText(%d chars, block %d): %v", tc.n, tc.block, err)
		}
		if len(d.Train) != tc.train || len(d.Val) != tc.val {
			t.Errorf("FromText(%d chars) split = %d/%d, want %d/%d", tc.n, len(d.Train), len(d.Val), tc.train, tc.val)
		}
		if got := d.Tok.Decode(d.Train) + d.Tok.Decode(d.Val); got != text {
			t.Errorf("train+val of %d chars does not decode to the text", tc.n)
		}
	}
}

func TestBadData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope.txt"), "no such file"},
		{"empty", write("empty.txt", ""), "empty"},
		{"not utf8", write("bin.txt", strings.Repeat("abc", 100)+"\xff\xfe"), "not valid UTF-8"},
		{"short", write("short.txt", strings.Repeat("x", 17)), "too short"},
		{"short val", write("short2.txt", strings.Repeat("xy", 80)), "too short"}, // 160: val 16 < 17
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadText(tc.path, 16)
			if !errors.Is(err, ErrBadData) {
				t.Fatalf("LoadText(%s) error = %v, want ErrBadData", tc.name, err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("LoadText(%s) error = %q, want one line containing %q", tc.name, err, tc.want)
			}
		})
	}
	// control: just long enough
	if _, err := LoadText(write("ok.txt", strings.Repeat("xy", 85)), 16); err != nil {
		t.Errorf("LoadText(170 chars, block 16) = %v, want success", err)
	}
}

func TestLoadTinyShakespeare(t *testing.T) {
	p := filepath.Join(testutil.Shared(t), "data", "tinyshakespeare.txt")
	d, err := LoadText(p, 64)
	if err != nil {
		t.Fatal(err)
	}
	if d.Tok.Vocab() != 65 || len(d.Train) != 1003854 || len(d.Val) != 111540 {
		t.Errorf("tinyshakespeare: vocab %d, split %d/%d; want 65, 1003854/111540 (nanoGPT's)", d.Tok.Vocab(), len(d.Train), len(d.Val))
	}
}

// FuzzFromText: the data reader takes any bytes; it either fails with
// ErrBadData or returns splits that decode back to the text.
func FuzzFromText(f *testing.F) {
	for _, s := range []string{"", "abc", strings.Repeat("hello ", 20), "\xff" + strings.Repeat("a", 50), strings.Repeat("☃é", 30)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, block int) {
		if block > 1<<20 {
			return
		}
		d, err := FromText(s, block)
		if err != nil {
			if !errors.Is(err, ErrBadData) {
				t.Fatalf("FromText(%q, %d) error = %v, want ErrBadData", s, block, err)
			}
			return
		}
		if len(d.Train) < block+1 || len(d.Val) < block+1 {
			t.Fatalf("FromText(%q, %d): splits %d/%d cannot hold a window", s, block, len(d.Train), len(d.Val))
		}
		if got := d.Tok.Decode(d.Train) + d.Tok.Decode(d.Val); got != s {
			t.Fatalf("FromText(%q): splits decode to %q", s, got)
		}
	})
}
