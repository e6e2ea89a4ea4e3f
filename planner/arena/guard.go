package arena

import (
	"fmt"
	"hash/fnv"

	"gptlab/planner"
)

// Verify re-checks the plan with the planner's two verifications (the
// overlap sweep and the byte-pattern simulation) and, on two streams, its
// two checks of the happens-before order (the order itself, and the
// streams' interleavings on a model of the arena).
func (p *Program) Verify() error {
	if err := planner.Check(p.problem, p.plan); err != nil {
		return fmt.Errorf("arena: %w", err)
	}
	if p.streams.n > 1 {
		if err := p.lifetimes.VerifyOrder(p.problem, p.plan); err != nil {
			return fmt.Errorf("arena: %w", err)
		}
		if err := p.lifetimes.SimulateStreams(p.problem, p.plan, SimulatedInterleavings, 1); err != nil {
			return fmt.Errorf("arena: %w", err)
		}
	}
	return nil
}

// SimulatedInterleavings is how many interleavings of the streams Verify
// simulates.
const SimulatedInterleavings = 16

// RunGuarded is Run with a check on real data, the ops in schedule order
// on one goroutine whatever the streams: when an op writes a planned
// output, the output's bytes are fingerprinted; every later read of it (and
// of a retained output at the end of the run) must find the same bytes. An
// op that overwrote storage still live elsewhere is caught at the next read
// of the victim. It is slow (a hash per read) and meant for tests.
func (p *Program) RunGuarded() error {
	if err := p.loadInputs(); err != nil {
		return err
	}
	sums := make(map[Value]uint64) // value -> fingerprint when written
	owner := p.storageOwner()
	check := func(v Value, when string) error {
		b := owner[v]
		want, ok := sums[b]
		if !ok {
			return nil
		}
		if got := fingerprint(p.bufs[b]); got != want {
			return fmt.Errorf("arena: %s of %v: its storage was overwritten while live", when, p.vals[b].node)
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
		if err := p.runStep(i, 0); err != nil {
			return err
		}
		if _, planned := p.bufOf[st.out]; planned {
			sums[st.out] = fingerprint(p.bufs[st.out])
		}
	}
	for _, v := range p.retained {
		if err := check(v, "end of run: retained output"); err != nil {
			return err
		}
	}
	return nil
}

func fingerprint(b Buf) uint64 {
	h := fnv.New64a()
	h.Write(b.Bytes())
	return h.Sum64()
}
