package arena

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/planner"
)

// outputs are a run's loss and gradients, copied.
func outputs(p *Program, loss *gorgonia.Node, grads gorgonia.Nodes) [][]float32 {
	out := [][]float32{append([]float32(nil), floats(p.Value(loss))...)}
	for _, gr := range grads {
		out = append(out, append([]float32(nil), floats(p.Value(gr))...))
	}
	return out
}

// TestStreamsMatchOneStream: on two streams (alternate steps, random
// ones, all but the first), with every planner, in place or not, the
// plan passes Verify (the order checks included) and every run gives
// bitwise the one-stream loss and gradients.
func TestStreamsMatchOneStream(t *testing.T) {
	ctx := context.Background()
	for _, algo := range planner.Algorithms() {
		for _, inPlace := range []bool{false, true} {
			g, loss, grads := mlp(t, 3)
			p, err := Compile(ctx, g, append(gorgonia.Nodes{loss}, grads...), Options{Algorithm: algo, InPlace: inPlace})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			want := outputs(p, loss, grads)
			n := p.Steps()
			r := rand.New(rand.NewPCG(uint64(n), 2))
			assignments := map[string][]int{"alternate": make([]int, n), "random": make([]int, n), "all but the first": make([]int, n)}
			for i := range n {
				assignments["alternate"][i] = i % 2
				assignments["random"][i] = r.IntN(2)
				assignments["all but the first"][i] = min(i, 1)
			}
			for name, streams := range assignments {
				t.Run(fmt.Sprintf("%s/inplace=%v/%s", algo.Name, inPlace, name), func(t *testing.T) {
					if err := p.SetStreams(ctx, streams); err != nil {
						t.Fatal(err)
					}
					if got := p.Streams(); fmt.Sprint(got) != fmt.Sprint(streams) {
						t.Fatalf("Streams() = %v, want %v", got, streams)
					}
					if err := p.Verify(); err != nil {
						t.Fatalf("Verify: %v", err)
					}
					for run := range 20 {
						if err := p.Run(); err != nil {
							t.Fatal(err)
						}
						for i, w := range want {
							if got := outputs(p, loss, grads)[i]; fmt.Sprint(got) != fmt.Sprint(w) {
								t.Fatalf("run %d output %d = %v, one stream %v", run, i, got, w)
							}
						}
					}
				})
			}
			if err := p.SetStreams(ctx, nil); err != nil {
				t.Fatal(err)
			}
			if p.streams.n > 1 || len(p.Streams()) != n {
				t.Errorf("SetStreams(nil): %d streams", p.streams.n)
			}
		}
	}
}

// TestStreamPlanRefusedOnOneStreamPlan: the two-stream program keeps the
// plan made for one stream (the negative control of the stream checks):
// Verify refuses it wherever it shares storage between ops that may run
// at the same time, and some assignment makes it do so.
func TestStreamPlanRefusedOnOneStreamPlan(t *testing.T) {
	ctx := context.Background()
	g, loss, grads := mlp(t, 3)
	p, err := Compile(ctx, g, append(gorgonia.Nodes{loss}, grads...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	onePlan := p.plan
	oneProblem := p.problem
	refused := 0
	for k := range 32 {
		r := rand.New(rand.NewPCG(uint64(k), 5))
		streams := make([]int, p.Steps())
		for i := range streams {
			streams[i] = r.IntN(2)
		}
		if err := p.SetStreams(ctx, streams); err != nil {
			t.Fatal(err)
		}
		if len(p.problem.Buffers) != len(oneProblem.Buffers) {
			t.Fatalf("%d buffers on two streams, %d on one", len(p.problem.Buffers), len(oneProblem.Buffers))
		}
		p.plan = onePlan
		err := p.Verify()
		// Whether the one-stream plan is a race here is the order's call.
		race := p.lifetimes.VerifyOrder(p.problem, onePlan) != nil
		if race != (err != nil) {
			t.Fatalf("assignment %d: Verify = %v, but the order says race=%v", k, err, race)
		}
		if race {
			refused++
			if !errors.Is(err, planner.ErrBadPlan) {
				t.Errorf("Verify = %v, want ErrBadPlan", err)
			}
		}
	}
	if refused == 0 {
		t.Error("no assignment made the one-stream plan a race: the control never fired")
	}
}

func TestSetStreamsRejects(t *testing.T) {
	g, loss, grads := mlp(t, 3)
	p, err := Compile(context.Background(), g, append(gorgonia.Nodes{loss}, grads...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, streams := range [][]int{{0, 1}, func() []int { s := make([]int, p.Steps()); s[1] = 2; return s }()} {
		if err := p.SetStreams(context.Background(), streams); err == nil {
			t.Errorf("SetStreams(%v) accepted", streams)
		}
	}
}

// failOp is an op whose Do fails: a stream that meets it must stop, and
// the run return its error, not hang.
type failOp struct{ opBase }

func (failOp) Arity() int { return 1 }
func (failOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (failOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (failOp) Do(...gorgonia.Value) (gorgonia.Value, error) { return nil, errors.New("failOp ran") }
func (failOp) WriteHash(h hash.Hash)                        { writeHash(h, "failOp") }
func (failOp) Hashcode() uint32                             { return hashString("failOp") }
func (failOp) String() string                               { return "failOp" }

// TestStreamFailureStops: an op failing on either stream ends the run
// with its error while the other stream waits for it.
func TestStreamFailureStops(t *testing.T) {
	for _, failing := range []int{0, 1} {
		g := gorgonia.NewGraph()
		x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 4), gorgonia.WithName("x"), gorgonia.WithValue(tensor.New(tensor.WithShape(4, 4), tensor.WithBacking(make([]float32, 16)))))
		a := gorgonia.Must(gorgonia.ApplyOp(failOp{}, x))
		b := gorgonia.Must(MatMul(x, x, false, false))
		y := gorgonia.Must(Add(a, b))
		p, err := Compile(context.Background(), g, gorgonia.Nodes{y}, Options{Order: []*gorgonia.Node{a, b, y}})
		if err != nil {
			t.Fatal(err)
		}
		streams := []int{failing, 1 - failing, 1 - failing}
		if err := p.SetStreams(context.Background(), streams); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := p.Run(); err == nil || !strings.Contains(err.Error(), "failOp ran") {
				t.Fatalf("failing op on stream %d: Run() = %v, want its error", failing, err)
			}
		}
	}
}
