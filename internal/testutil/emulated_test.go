package testutil

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A speed benchmark under emulation skips before its loop runs; natively
// it runs (the negative control).
func TestSkipSpeedEmulated(t *testing.T) {
	saved := isEmulated
	defer func() { isEmulated = saved }()
	for _, emu := range []bool{true, false} {
		isEmulated = func() bool { return emu }
		ran := false
		r := testing.Benchmark(func(b *testing.B) {
			SkipSpeedEmulated(b)
			for b.Loop() {
				ran = true
			}
		})
		if ran == emu || (r.N > 0) == emu {
			t.Errorf("emulated %v: the benchmark's loop ran %v (N = %d)", emu, ran, r.N)
		}
	}
}

// Every benchmark in the module begins with SkipSpeedEmulated: each
// reports a speed (ns/op at least), which under emulation is the
// emulator's.
func TestEveryBenchmarkSkipsEmulated(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("no module root at %s: %v", root, err)
	}
	n := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Benchmark") || fn.Body == nil {
				continue
			}
			n++
			if !startsWithSkip(fn.Body) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s: %s does not begin with testutil.SkipSpeedEmulated(b)", rel, fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no benchmarks found: the walk looked in the wrong place")
	}
	t.Logf("%d benchmarks, each skipping under emulation", n)
}

// startsWithSkip: the body's first statement is a call of
// testutil.SkipSpeedEmulated (or, in this package, SkipSpeedEmulated).
func startsWithSkip(body *ast.BlockStmt) bool {
	if len(body.List) == 0 {
		return false
	}
	es, ok := body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.SelectorExpr:
		x, ok := f.X.(*ast.Ident)
		return ok && x.Name == "testutil" && f.Sel.Name == "SkipSpeedEmulated"
	case *ast.Ident:
		return f.Name == "SkipSpeedEmulated"
	}
	return false
}
