package arena

import (
	"context"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/chewxy/hm"
	"gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"gptlab/internal/par"
)

// spinOp passes its input on after spinning for d: an op of a known
// least duration.
type spinOp struct {
	opBase
	d time.Duration
}

func (spinOp) Arity() int { return 1 }
func (spinOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (spinOp) InferShape(in ...gorgonia.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (op spinOp) Do(in ...gorgonia.Value) (gorgonia.Value, error) {
	for t0 := time.Now(); time.Since(t0) < op.d; {
	}
	return in[0].(*tensor.Dense).Clone().(*tensor.Dense), nil
}
func (op spinOp) WriteHash(h hash.Hash) { writeHash(h, op.String()) }
func (op spinOp) Hashcode() uint32      { return hashString(op.String()) }
func (op spinOp) String() string        { return "spin" + op.d.String() }

// TestTimeline: stream 0 reads what a spinning op of stream 1 writes, so
// it waits about the spin; the timeline names that wait, the op it
// waited for, and each stream's time. With y after a on stream 1 nothing
// waits long (the negative control: y's wait for b, done long before, is
// not listed), and a program on one stream has no timeline.
func TestTimeline(t *testing.T) {
	if par.Workers() == 0 {
		t.Skip("one usable CPU: no second stream to time")
	}
	const spin = 5 * time.Millisecond
	ctx := context.Background()
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(4, 4), gorgonia.WithName("x"), gorgonia.WithValue(tensor.New(tensor.WithShape(4, 4), tensor.WithBacking(make([]float32, 16)))))
	a := gorgonia.Must(gorgonia.ApplyOp(spinOp{d: spin}, x)) // stream 1
	b := gorgonia.Must(Add(x, x))                            // stream 0, beside a
	y := gorgonia.Must(Add(a, b))                            // stream 0: waits for a
	p, err := Compile(ctx, g, gorgonia.Nodes{y}, Options{Order: []*gorgonia.Node{a, b, y}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Timeline(3); err == nil || !strings.Contains(err.Error(), "one") {
		t.Fatalf("Timeline on one stream: %v, want an error", err)
	}
	for _, c := range []struct {
		streams []int
		waits   bool
	}{{[]int{1, 0, 0}, true}, {[]int{1, 0, 1}, false}} {
		if err := p.SetStreams(ctx, c.streams); err != nil {
			t.Fatal(err)
		}
		tl, err := p.Timeline(3)
		if err != nil {
			t.Fatal(err)
		}
		s0, s1 := tl.Streams[0], tl.Streams[1]
		if tl.Runs != 3 || s0.Ops+s1.Ops != 3 || s1.Busy < spin || s1.Finished < s1.Busy || s0.Finished < s0.Busy+s0.Waiting || tl.Run < max(s0.Finished, s1.Finished) {
			t.Errorf("streams %v: timeline %+v: the times do not add up", c.streams, tl)
		}
		if !c.waits {
			if len(tl.Waits) != 0 || s0.Waiting != 0 || s1.Waiting >= MinWait {
				t.Errorf("streams %v: waits %+v, waiting %v and %v: want none listed (y, after a on stream 1, waits for b, done long before)", c.streams, tl.Waits, s0.Waiting, s1.Waiting)
			}
			continue
		}
		// y starts after a's spin at the earliest, having waited since
		// b's end (at once, unless the caller lost its core that long).
		if len(tl.Waits) != 1 {
			t.Fatalf("streams %v: waits %+v, want y's", c.streams, tl.Waits)
		}
		w := tl.Waits[0]
		if w.Step != 2 || w.For != 0 || w.Stream != 0 || w.ForOp != "spin"+spin.String() || w.Time > tl.Run || s0.Waiting < MinWait || s0.Finished < spin {
			t.Errorf("streams %v: wait %+v, stream 0 waiting %v: want step 2 waiting for step 0, about %v", c.streams, w, s0.Waiting, spin)
		}
		// The spinning op offers no chunks: a wait for it helps with
		// nothing (at most a stale seat of an earlier split, which finds
		// its loop done), and the timeline must not count the wait as
		// helping.
		if s0.Helping >= MinWait {
			t.Errorf("streams %v: stream 0 helping %v while waiting for an op that offers no chunks", c.streams, s0.Helping)
		}
	}
}

// TestTimelineHelping: stream 0 waits for a chain of large adds on stream
// 1, whose kernels split their rows: the waiting stream runs some of their
// chunks, and the timeline counts that time within its wait.
func TestTimelineHelping(t *testing.T) {
	if par.Workers() == 0 {
		t.Skip("one usable CPU: no second stream to time")
	}
	const n = 1024
	ctx := context.Background()
	g := gorgonia.NewGraph()
	x := gorgonia.NewMatrix(g, tensor.Float32, gorgonia.WithShape(n, n), gorgonia.WithName("x"), gorgonia.WithValue(tensor.New(tensor.WithShape(n, n), tensor.WithBacking(make([]float32, n*n)))))
	order := []*gorgonia.Node{}
	a := x
	for range 8 { // stream 1
		a = gorgonia.Must(Add(a, x))
		order = append(order, a)
	}
	y := gorgonia.Must(Add(a, x)) // stream 0's only op: waits for the chain
	order = append(order, y)
	p, err := Compile(ctx, g, gorgonia.Nodes{y}, Options{Order: order})
	if err != nil {
		t.Fatal(err)
	}
	streams := make([]int, len(order))
	for i := range 8 {
		streams[i] = 1
	}
	if err := p.SetStreams(ctx, streams); err != nil {
		t.Fatal(err)
	}
	// Whether a chunk is left for the waiting stream is a race it wins
	// most of the time: a few tries.
	var s0, s1 StreamTime
	for try := 0; try < 5 && s0.Helping == 0; try++ {
		tl, err := p.Timeline(5)
		if err != nil {
			t.Fatal(err)
		}
		s0, s1 = tl.Streams[0], tl.Streams[1]
		if s0.Helping > s0.Waiting || s1.Helping > s1.Waiting {
			t.Fatalf("stream 0 waited %v, helping %v; stream 1 waited %v, helping %v: helping beyond the wait", s0.Waiting, s0.Helping, s1.Waiting, s1.Helping)
		}
	}
	if s0.Helping == 0 {
		t.Errorf("stream 0 waited %v and never helped in five timelines: want it to run chunks of stream 1's adds", s0.Waiting)
	}
}
