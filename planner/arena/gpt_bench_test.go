package arena_test

import (
	"context"
	"testing"

	G "gorgonia.org/gorgonia"

	"gptlab/internal/testutil"
	"gptlab/models"
	"gptlab/planner/arena"
)

// BenchmarkTrainingStep compares one forward+backward pass of the GPT run
// by gorgonia's TapeMachine with the same graph run from the arena.
func BenchmarkTrainingStep(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, name := range []string{"tiny", "small", "baby"} {
		mc, err := models.Preset(name)
		if err != nil {
			b.Fatal(err)
		}
		m, err := models.NewModel(mc, models.NewParams(mc, 1), mc.Batch, mc.Block, true, models.WithTapeMachine())
		if err != nil {
			b.Fatal(err)
		}
		idx := make([]int32, mc.Batch*mc.Block)
		for i := range idx {
			idx[i] = int32(i % mc.Vocab)
		}
		if _, err := m.Step(idx, idx); err != nil {
			b.Fatal(err)
		}
		retain := append(G.Nodes{m.LossNode(), m.LogitsNode()}, m.GradNodes()...)
		p, err := arena.Compile(context.Background(), m.Graph(), retain, arena.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/tape", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Step(idx, idx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/arena", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		m.Close()
	}
}
