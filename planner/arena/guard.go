package arena

import (
	"fmt"
	"hash/fnv"
	"unsafe"

	"gorgonia.org/gorgonia"

	"gptlab/planner"
)

// Verify re-checks the plan with the planner's two verifications (the
// overlap sweep and the byte-pattern simulation).
func (p *Program) Verify() error {
	if err := planner.Check(p.problem, p.plan); err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	return nil
}

// RunGuarded is Run with a check on real data: when an op writes a planned
// output, the output's bytes are fingerprinted; every later read of it (and
// of a retained output at the end of the run) must find the same bytes. An
// op that overwrote storage still live elsewhere is caught at the next read
// of the victim. It is slow (a hash per read) and meant for tests.
func (p *Program) RunGuarded() error {
	if err := p.loadInputs(); err != nil {
		return err
	}
	sums := make(map[int]uint64) // slot -> fingerprint when written
	owner := p.storageOwner()
	check := func(slot int, when string) error {
		b := owner[slot]
		want, ok := sums[b]
		if !ok {
			return nil
		}
		if got := fingerprint(p.values[b]); got != want {
			return fmt.Errorf("arena: %s of %v: its storage was overwritten while live", when, p.nodes[b])
		}
		return nil
	}
	for i := range p.steps {
		st := &p.steps[i]
		for _, s := range st.in {
			if err := check(s, fmt.Sprintf("step %d reads", i)); err != nil {
				return err
			}
		}
		if err := p.runStep(st); err != nil {
			return err
		}
		if _, planned := p.bufOf[st.out]; planned {
			sums[st.out] = fingerprint(p.values[st.out])
		}
	}
	for _, s := range p.retained {
		if err := check(s, "end of run: retained output"); err != nil {
			return err
		}
	}
	return nil
}

// storageOwner maps every slot to the slot whose planned storage it reads
// (itself, or the base of a view).
func (p *Program) storageOwner() []int {
	owner := make([]int, len(p.nodes))
	for i := range owner {
		owner[i] = i
	}
	for _, st := range p.steps {
		if st.view {
			owner[st.out] = owner[st.in[0]]
		}
	}
	return owner
}

func fingerprint(v gorgonia.Value) uint64 {
	h := fnv.New64a()
	b, ok := bufOf(v)
	switch {
	case !ok:
	case len(b.F32) > 0:
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&b.F32[0])), 4*len(b.F32)))
	case len(b.Int) > 0:
		h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&b.Int[0])), int(unsafe.Sizeof(0))*len(b.Int)))
	}
	return h.Sum64()
}
