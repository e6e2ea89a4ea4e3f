package planner

import (
	"errors"
	"fmt"
	"slices"
)

// Op is one step of a Program: it reads In and writes Out (Size bytes).
// Values read but written by no op (weights, constants) are the caller's
// and are not planned.
type Op struct {
	Fn   string   // what it computes, for reports: "matmul", "gelu+add"
	Out  string   // the value it writes
	Size int64    // bytes of Out (ignored for a view)
	In   []string // the values it reads
	// View marks Out as a view of In[0] (a reshape, a slice): no storage
	// of its own.
	View bool
	// InPlace names an input whose storage Out takes; it must be Legal.
	InPlace string
	// Unplanned marks an op that allocates its own output outside the
	// arena (an op an executor cannot bind to planned storage): its value
	// gets no buffer, but its reads still keep its inputs alive.
	Unplanned bool
	// Stream is the stream that runs the op (streams.go): 0, the only one
	// of a plain schedule, or up to MaxStreams-1.
	Stream int
}

// Program is a schedule of ops, one per step, and what the caller keeps.
type Program struct {
	Ops      []Op
	Inputs   []string // values that are the caller's data (written by an "input" op)
	Outputs  []string // values the caller receives
	Retained []string // values someone keeps after the program (saved for backward)
	Donated  []string // inputs the caller gives up: they may be overwritten
}

// ErrRefused marks an in-place or donation request that would destroy data
// someone still needs.
var ErrRefused = errors.New("in-place refused")

// Refusal is the error Legal returns: which request, and why not. It
// wraps ErrRefused.
type Refusal struct {
	Op      int    // the op asking to write in place
	Fn      string // what it computes
	Out, In string // its output, and the input it would overwrite
	Reason  string // why that would destroy data someone needs
}

// Error says which request was refused and why.
func (r *Refusal) Error() string {
	return fmt.Sprintf("%v: op %d (%s) writing %q over %q: %s", ErrRefused, r.Op, r.Fn, r.Out, r.In, r.Reason)
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (r *Refusal) Unwrap() error { return ErrRefused }

// index maps each value to the op that writes it, and checks that every
// value is written once and read only after it is written.
func (p Program) index() (map[string]int, error) {
	writer := make(map[string]int, len(p.Ops))
	for i, op := range p.Ops {
		if op.Out == "" {
			return nil, fmt.Errorf("%w: op %d (%s) writes no value", ErrInvalid, i, op.Fn)
		}
		if j, dup := writer[op.Out]; dup {
			return nil, fmt.Errorf("%w: value %q is written by op %d and op %d", ErrInvalid, op.Out, j, i)
		}
		writer[op.Out] = i
	}
	for i, op := range p.Ops {
		for _, in := range op.In {
			if j, ok := writer[in]; ok && j >= i {
				return nil, fmt.Errorf("%w: op %d (%s) reads %q before op %d writes it", ErrInvalid, i, op.Fn, in, j)
			}
		}
		if op.View && len(op.In) == 0 {
			return nil, fmt.Errorf("%w: op %d (%s) is a view of nothing", ErrInvalid, i, op.Fn)
		}
		if op.View {
			w, ok := writer[op.In[0]]
			if !ok {
				return nil, fmt.Errorf("%w: op %d (%s) is a view of %q, which the program does not write", ErrInvalid, i, op.Fn, op.In[0])
			}
			if p.Ops[w].Unplanned {
				return nil, fmt.Errorf("%w: op %d (%s) is a view of %q, which lives outside the arena", ErrInvalid, i, op.Fn, op.In[0])
			}
		}
	}
	for _, list := range []struct {
		what  string
		names []string
	}{{"input", p.Inputs}, {"output", p.Outputs}, {"retained value", p.Retained}, {"donated input", p.Donated}} {
		for _, name := range list.names {
			if _, ok := writer[name]; !ok {
				return nil, fmt.Errorf("%w: %s %q is not written by any op", ErrInvalid, list.what, name)
			}
		}
	}
	for _, name := range p.Donated {
		if !slices.Contains(p.Inputs, name) {
			return nil, fmt.Errorf("%w: donated %q is not an input", ErrInvalid, name)
		}
	}
	return writer, nil
}

// lastRead returns the last op that reads name or any view of it, or -1.
func (p Program) lastRead(name string) int {
	last := -1
	for i, op := range p.Ops {
		if slices.Contains(op.In, name) {
			last = i
			if op.View && op.In[0] == name {
				last = max(last, p.lastRead(op.Out))
			}
		}
	}
	return last
}

// Legal reports whether op may write its output over its input in: nil, or
// an error wrapping ErrRefused that gives the reason. The input's storage
// must be the program's to destroy and nobody may read it afterwards: the
// op is its last reader (counting reads through views; under several
// streams, every other reader happens before the op), it is not a view
// itself, not an output or retained value, not a caller's input unless
// donated, not a weight the program never wrote; and the output must fit.
// Whether the op's kernel can run in place (an elementwise op can, a
// matmul cannot) is the caller's claim; Legal judges only the lifetimes
// and who owns the storage.
func (p Program) Legal(op int, in string) error {
	writer, err := p.index()
	if err != nil {
		return err
	}
	if op < 0 || op >= len(p.Ops) {
		return &Refusal{Op: op, In: in, Reason: fmt.Sprintf("there is no op %d", op)}
	}
	o := p.Ops[op]
	refuse := func(format string, args ...any) error {
		return &Refusal{Op: op, Fn: o.Fn, Out: o.Out, In: in, Reason: fmt.Sprintf(format, args...)}
	}
	w, written := writer[in]
	switch {
	case !slices.Contains(o.In, in):
		return refuse("the op does not read %q", in)
	case o.View:
		return refuse("the op makes a view, it writes nothing")
	case !written:
		return refuse("%q is not written by the program (a weight or constant the caller owns)", in)
	case p.Ops[w].View:
		return refuse("%q is a view of %q; writing over it would change %q", in, p.Ops[w].In[0], p.Ops[w].In[0])
	case p.Ops[w].Unplanned:
		return refuse("%q lives outside the arena", in)
	case o.Unplanned:
		return refuse("the op writes outside the arena")
	case slices.Contains(p.Outputs, in):
		return refuse("%q is a program output: the caller reads it after the program", in)
	case slices.Contains(p.Retained, in):
		return refuse("%q is retained: someone reads it after the program", in)
	case slices.Contains(p.Inputs, in) && !slices.Contains(p.Donated, in):
		return refuse("%q is a program input the caller still owns (not donated)", in)
	}
	if !p.multiStream() {
		if last := p.lastRead(in); last > op {
			return refuse("%q is read again by op %d (%s)", in, last, p.Ops[last].Fn)
		}
	} else {
		ord, err := p.order(writer)
		if err != nil {
			return err
		}
		for _, r := range p.readers()[in] {
			if r != op && !ord.Before(r, op) {
				return refuse("%q is read by op %d (%s, stream %d), which does not happen before op %d (stream %d)",
					in, r, p.Ops[r].Fn, p.Ops[r].Stream, op, o.Stream)
			}
		}
	}
	if o.Size > p.Ops[w].Size {
		return refuse("the output (%s) does not fit in %q (%s)", FormatBytes(o.Size), in, FormatBytes(p.Ops[w].Size))
	}
	return nil
}

// Temps derives the lifetime of every value from the schedule: a value is
// written at its op's step and last read at the last op reading it (itself
// if nobody does). Under more than one stream (Op.Stream) a value is in
// use from the first position of an op that may run beside its writer
// (Order.Earliest). Kinds come from Inputs, Outputs, Retained and Donated;
// views become aliases. Each op with InPlace must be Legal; the output then
// shares its input's storage, so the two values become one Temp named
// "in/out" spanning both lifetimes, with the larger size.
func (p Program) Temps() ([]Temp, error) {
	writer, err := p.index()
	if err != nil {
		return nil, err
	}
	n := len(p.Ops)
	// group[i]: the op whose value owns op i's storage after in-place merges.
	group := make([]int, n)
	for i, op := range p.Ops {
		group[i] = i
		if op.InPlace == "" {
			continue
		}
		if err := p.Legal(i, op.InPlace); err != nil {
			return nil, err
		}
		group[i] = group[writer[op.InPlace]]
	}
	// With one stream a value is in use from its writer's position; with
	// more, from the first position of an op that may run beside the
	// writer (Order.Earliest).
	first := make([]int, n)
	var ord *Order
	if p.multiStream() {
		if ord, err = p.order(writer); err != nil {
			return nil, err
		}
	}
	for i := range n {
		first[i] = i
		if ord != nil {
			first[i] = ord.Earliest(i)
		}
	}
	temps := make([]Temp, 0, n)
	at := make(map[int]int, n)        // group root -> index in temps
	viewOf := make(map[int]string, n) // index in temps -> the value a view reads
	for i, op := range p.Ops {
		if op.Unplanned {
			continue
		}
		last := i
		for j := i + 1; j < n; j++ {
			if slices.Contains(p.Ops[j].In, op.Out) {
				last = j
			}
		}
		t := Temp{Name: op.Out, Size: op.Size, First: first[i], Last: last, Kind: p.kindOf(op.Out), Values: []string{op.Out}}
		if t.Kind == Input && slices.Contains(p.Donated, op.Out) {
			t.Donated = true
		}
		if op.View {
			t.Kind, t.Size = Alias, 0
			viewOf[len(temps)] = op.In[0] // a view is never merged: Legal refuses it
		}
		k, merged := at[group[i]]
		if !merged {
			at[group[i]] = len(temps)
			temps = append(temps, t)
			continue
		}
		m := &temps[k] // the value op i writes over, possibly itself merged
		m.Name += "/" + t.Name
		m.Values = append(m.Values, t.Name)
		m.Size = max(m.Size, t.Size)
		m.First, m.Last = min(m.First, t.First), max(m.Last, t.Last)
		if t.Kind == Output || t.Kind == Retained {
			m.Kind, m.Donated = t.Kind, false
		}
	}
	// Views name the storage owner by its merged name.
	for k, of := range viewOf {
		temps[k].Of = temps[at[group[writer[of]]]].Name
	}
	return temps, nil
}

// kindOf classifies a value by the program's lists.
func (p Program) kindOf(name string) Kind {
	switch {
	case slices.Contains(p.Outputs, name):
		return Output
	case slices.Contains(p.Retained, name):
		return Retained
	case slices.Contains(p.Inputs, name):
		return Input
	}
	return Temporary
}

// Problem derives the temps and lowers them with the given alignment.
func (p Program) Problem(alignment int64) (Problem, []Temp, error) {
	temps, err := p.Temps()
	if err != nil {
		return Problem{}, nil, err
	}
	pr, err := Lower(temps, alignment)
	return pr, temps, err
}
