package lab

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoLabImportsAnother: a lab's package (every folder under
// experiments/ but lab and cli) imports no other lab and not the
// commands; what two labs share lives in this package or in the library
// package that owns it. Test files may import the commands (a
// multi-process lab's test binary acts as gptlab).
func TestNoLabImportsAnother(t *testing.T) {
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	labs := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "lab" || d.Name() == "cli" {
			continue
		}
		labs++
		files, _ := filepath.Glob(filepath.Join("..", d.Name(), "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				if rest, ok := strings.CutPrefix(p, "gptlab/experiments/"); ok && rest != "lab" {
					t.Errorf("%s imports %s: a lab imports no other lab and not the commands", f, p)
				}
			}
		}
	}
	if labs < 8 {
		t.Errorf("found %d lab folders under experiments/, want at least the 8 built labs", labs)
	}
}
