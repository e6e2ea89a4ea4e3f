package planner

import (
	"errors"
	"fmt"
)

// Kind says who owns a value's storage, and so whether it may be reused.
type Kind int

const (
	// Temporary is written at First and dead after its last read at Last:
	// its storage may be reused from Last+1.
	Temporary Kind = iota
	// Input is the caller's data: it must survive the whole program, so it
	// is live from step 0 to the end, unless the caller donated it, in
	// which case it is a temporary like any other.
	Input
	// Output is returned to the caller: live from its write to the end.
	Output
	// Alias is a view of another value (Temp.Of) with no storage of its
	// own; its reads keep the viewed value alive.
	Alias
	// Retained is kept by someone outside the schedule after its last read
	// here (saved for the backward pass, cached): live to the end.
	Retained
)

var kindNames = [...]string{"temporary", "input", "output", "alias", "retained"}

// String names the kind as the reports print it.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return kindNames[k]
}

// Temp is a value of the chapter's model: written at step First, last read
// at step Last (both inclusive), Size bytes aligned to Align (0 or a power
// of two). The reuse rule is the chapter's: a new value may take an old
// one's storage only when old.Last < new.First.
type Temp struct {
	Name        string
	Size, Align int64
	First, Last int
	Kind        Kind
	Of          string // for an Alias: the value it views
	Donated     bool   // for an Input: the caller gave it up to be overwritten
	// Values are the program values sharing this storage: the value
	// itself, and after in-place merges (Program.Temps) every value written
	// over it, in schedule order. Name joins them with "/" for reports.
	Values []string
}

// Lower turns temporaries into a placement Problem. Each value with
// storage becomes the Buffer [First, Last+1); the problem's alignment is
// the largest of alignment and every Temp's Align (all powers of two, so
// that is their least common multiple). Values excluded from reuse keep
// their storage for the whole run: an undonated Input is live from step 0
// to the end, an Output or Retained value from its write to the end, so no
// later value can take their bytes. An Alias gets no buffer; the value it
// views (following chains of views) lives until the alias's last read.
// Buffers keep the order of temps, aliases left out.
func Lower(temps []Temp, alignment int64) (Problem, error) {
	if alignment <= 0 || alignment&(alignment-1) != 0 {
		return Problem{}, fmt.Errorf("%w: alignment %d is not a power of two", ErrInvalid, alignment)
	}
	index := make(map[string]int, len(temps))
	end := 0
	for i, t := range temps {
		if err := t.validate(); err != nil {
			return Problem{}, err
		}
		if j, dup := index[t.Name]; dup {
			return Problem{}, fmt.Errorf("%w: value %q defined twice (temps %d and %d)", ErrInvalid, t.Name, j, i)
		}
		index[t.Name] = i
		end = max(end, t.Last)
		alignment = max(alignment, t.Align)
	}
	last := make([]int, len(temps))
	for i, t := range temps {
		last[i] = t.Last
	}
	for _, t := range temps {
		if t.Kind != Alias {
			continue
		}
		root, err := viewRoot(temps, index, t.Name)
		if err != nil {
			return Problem{}, err
		}
		last[root] = max(last[root], t.Last)
	}
	p := Problem{Alignment: alignment}
	for i, t := range temps {
		first := t.First
		switch t.Kind {
		case Alias:
			continue
		case Input:
			if !t.Donated {
				first, last[i] = 0, end
			}
		case Output, Retained:
			last[i] = end
		}
		p.Buffers = append(p.Buffers, Buffer{ID: t.Name, Start: int64(first), End: int64(last[i]) + 1, Size: t.Size})
	}
	return p, p.Validate()
}

// validate reports a temp that makes no sense on its own.
func (t Temp) validate() error {
	switch {
	case t.Name == "":
		return fmt.Errorf("%w: a value has no name", ErrInvalid)
	case t.Kind < Temporary || t.Kind > Retained:
		return fmt.Errorf("%w: value %q has unknown kind %d", ErrInvalid, t.Name, int(t.Kind))
	case t.Kind != Alias && t.Size <= 0:
		return fmt.Errorf("%w: value %q has size %d; want > 0", ErrInvalid, t.Name, t.Size)
	case t.Align < 0 || t.Align&(t.Align-1) != 0:
		return fmt.Errorf("%w: value %q has alignment %d, not a power of two", ErrInvalid, t.Name, t.Align)
	case t.First < 0:
		return fmt.Errorf("%w: value %q is written at step %d < 0", ErrInvalid, t.Name, t.First)
	case t.Last < t.First:
		return fmt.Errorf("%w: value %q is last read at step %d, before it is written at step %d", ErrInvalid, t.Name, t.Last, t.First)
	case t.Kind == Alias && t.Of == "":
		return fmt.Errorf("%w: alias %q does not say what it views", ErrInvalid, t.Name)
	case t.Donated && t.Kind != Input:
		return fmt.Errorf("%w: value %q is donated but is a %v, not an input", ErrInvalid, t.Name, t.Kind)
	}
	return nil
}

var errAliasCycle = errors.New("views form a cycle")

// viewRoot follows views from name to the value that owns the storage.
func viewRoot(temps []Temp, index map[string]int, name string) (int, error) {
	i := index[name]
	for steps := 0; temps[i].Kind == Alias; steps++ {
		j, ok := index[temps[i].Of]
		if !ok {
			return 0, fmt.Errorf("%w: alias %q views %q, which is not defined", ErrInvalid, temps[i].Name, temps[i].Of)
		}
		if steps > len(temps) {
			return 0, fmt.Errorf("%w: alias %q: %w", ErrInvalid, name, errAliasCycle)
		}
		i = j
	}
	return i, nil
}
