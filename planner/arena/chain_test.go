package arena

import (
	"context"
	"testing"

	"gorgonia.org/gorgonia"
)

// TestMatrixChain: the chain run from the arena equals the naive run, and
// the arena holds two temporaries at a time instead of all of them.
func TestMatrixChain(t *testing.T) {
	dims := []int{64, 48, 80, 32, 96, 40, 64}
	g, out := Chain(dims, 1)
	vm := gorgonia.NewTapeMachine(g)
	if err := vm.RunAll(); err != nil {
		t.Fatal(err)
	}
	want := append([]float64(nil), out.Value().Data().([]float64)...)
	vm.Close()

	g2, out2 := Chain(dims, 1)
	p, err := Compile(context.Background(), g2, gorgonia.Nodes{out2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.RunGuarded(); err != nil {
		t.Fatal(err)
	}
	got := p.Value(out2).Data().([]float64)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("chain[%d] = %v from the arena, %v naive", i, got[i], want[i])
		}
	}
	st := p.Stats()
	if st.Planned != len(dims)-2 {
		t.Errorf("planned %d products, want %d", st.Planned, len(dims)-2)
	}
	// Each product is read only by the next: at most two live at once.
	var most int64
	for i := 1; i+2 < len(dims); i++ {
		a := int64(dims[0]*dims[i]) * 8
		b := int64(dims[0]*dims[i+1]) * 8
		most = max(most, a+b)
	}
	if st.BoundBytes != most {
		t.Errorf("lower bound %d bytes, want %d (two adjacent products)", st.BoundBytes, most)
	}
	if st.ArenaBytes >= st.NaiveBytes {
		t.Errorf("arena %d bytes is no smaller than naive %d", st.ArenaBytes, st.NaiveBytes)
	}
	t.Logf("matrix chain: naive %d B, arena %d B, bound %d B", st.NaiveBytes, st.ArenaBytes, st.BoundBytes)
}
