package arena

import (
	"context"
	"testing"

	"gorgonia.org/gorgonia"
)

func TestGuardedRunPassesOnAGoodPlan(t *testing.T) {
	g, loss, grads := mlp(t, 5)
	p, err := Compile(context.Background(), g, append(gorgonia.Nodes{loss}, grads...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(); err != nil {
		t.Fatalf("Verify() = %v on the planner's own plan", err)
	}
	if err := p.RunGuarded(); err != nil {
		t.Fatalf("RunGuarded() = %v on the planner's own plan", err)
	}
}

// TestCorruptedPlanIsCaught moves a retained gradient onto the storage of
// a buffer written after it: both the plan verification and the guarded
// run on real data must object. This is the negative control for the
// claim that retained outputs are never overwritten.
func TestCorruptedPlanIsCaught(t *testing.T) {
	g, loss, grads := mlp(t, 5)
	p, err := Compile(context.Background(), g, append(gorgonia.Nodes{loss}, grads...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	bufs := p.problem.Buffers
	victim := -1 // the gradient written first
	for _, gr := range grads {
		if b := p.bufOf[p.byNode[gr.ID()]]; victim < 0 || bufs[b].Start < bufs[victim].Start {
			victim = b
		}
	}
	culprit := -1
	for i, b := range bufs {
		if i != victim && b.Start > bufs[victim].Start {
			culprit = i
			break
		}
	}
	if culprit < 0 {
		t.Fatal("no buffer written after the gradient to collide with")
	}
	p.plan.Offsets[victim] = p.plan.Offsets[culprit]
	p.bind()
	if err := p.Verify(); err == nil {
		t.Error("Verify() accepted a plan where a retained gradient shares storage with a later buffer")
	}
	if err := p.RunGuarded(); err == nil {
		t.Error("RunGuarded() accepted a run where a retained gradient was overwritten")
	} else {
		t.Logf("caught: %v", err)
	}
}
