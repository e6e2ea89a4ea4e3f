package models

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gptlab/precision"
)

// TestStreamsBitwise trains the same model on one stream and on two
// (random assignments of the step's ops, and the stream scheduler's),
// with dropout and AdamW, under f32, bf16 and a checkpointing schedule:
// every loss and every weight must be bitwise equal, and the two-stream
// plan must pass Verify (the happens-before checks included).
func TestStreamsBitwise(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dropout = 0.1
	keep, err := CheckpointStepSchedule(cfg, []int{1})
	if err != nil {
		t.Fatal(err)
	}
	bf16, err := precision.ParsePolicy("bf16")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts []ModelOption
	}{
		{"f32", nil},
		{"bf16", []ModelOption{WithPrecision(bf16)}},
		{"checkpointed", []ModelOption{WithStepSchedule(keep)}},
	}
	for _, tc := range cases {
		train := func(assign func(m *Model) error) ([]float32, []float32) {
			p := NewParams(cfg, 5)
			m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if err := assign(m); err != nil {
				t.Fatal(err)
			}
			return trainSteps(t, m, p, cfg, 6), append([]float32(nil), p.Data()...)
		}
		wantLoss, wantP := train(func(*Model) error { return nil })
		for _, way := range []string{"random", "scheduler"} {
			t.Run(tc.name+"/"+way, func(t *testing.T) {
				gotLoss, gotP := train(func(m *Model) error {
					a := m.Arena()
					streams := make([]int, a.Steps())
					switch way {
					case "random":
						r := rand.New(rand.NewPCG(uint64(len(streams)), 11))
						for i := range streams {
							streams[i] = r.IntN(2)
						}
					case "scheduler":
						c, err := a.AssignStreams(context.Background(), 1)
						if err != nil {
							return err
						}
						streams = a.Streams()
						t.Logf("scheduler: %d ops on stream 0, %d on stream 1", c.Steps[0], c.Steps[1])
					}
					if err := a.SetStreams(context.Background(), streams); err != nil {
						return err
					}
					return a.Verify()
				})
				if fmt.Sprint(gotLoss) != fmt.Sprint(wantLoss) {
					t.Fatalf("losses on two streams %v, on one %v", gotLoss, wantLoss)
				}
				for i, w := range wantP {
					if gotP[i] != w {
						t.Fatalf("weight %d after 6 AdamW steps: two streams %v, one %v", i, gotP[i], w)
					}
				}
			})
		}
	}
}

func TestWithStreamsRefuses(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	p := NewParams(cfg, 1)
	if _, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStreams(TwoStreams), WithTapeMachine()); !errors.Is(err, ErrConfig) {
		t.Errorf("two streams on the TapeMachine: %v, want ErrConfig", err)
	}
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true, WithStreams(StreamsByMeasurement))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c, ok := m.StreamChoice()
	if !ok || (c.Chosen != 1 && c.Chosen != 2) || c.Steps[0]+c.Steps[1] != m.Arena().Steps() {
		t.Errorf("StreamChoice() = %+v, %v", c, ok)
	}
	if _, ok := oneStreamModel(t, cfg, p).StreamChoice(); ok {
		t.Error("a model on one stream by default has a StreamChoice")
	}
}

// oneStreamModel is a training model on one stream.
func oneStreamModel(t *testing.T, cfg Config, p *Params) *Model {
	t.Helper()
	m, err := NewModel(cfg, p, cfg.Batch, cfg.Block, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestStreamCostsDeterministic: the cost model's stream costs give every
// step a cost (products the largest), the same assignment on every model
// of one config, and refuse a split gain below 1.
func TestStreamCostsDeterministic(t *testing.T) {
	cfg, err := Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	assign := func() []int {
		m := oneStreamModel(t, cfg, NewParams(cfg, 1))
		costs, err := m.StreamCosts(DefaultCost, 1.6)
		if err != nil {
			t.Fatal(err)
		}
		if len(costs) != m.Arena().Steps() {
			t.Fatalf("%d costs for %d steps", len(costs), m.Arena().Steps())
		}
		for i, c := range costs {
			if c.Shared < 0 || math.Abs(c.Alone*1.6-c.Shared) > 1e-12*c.Shared {
				t.Fatalf("step %d: cost %+v, want Alone = Shared / 1.6", i, c)
			}
		}
		c, err := m.Arena().AssignStreamsFrom(context.Background(), costs)
		if err != nil {
			t.Fatal(err)
		}
		if c.Steps[1] == 0 || c.Assignment.TwoStreams >= c.Assignment.OneStream {
			t.Errorf("the cost model keeps one stream: %+v", c.Assignment)
		}
		return m.Arena().Streams()
	}
	if a, b := assign(), assign(); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("two models of one config: streams %v, then %v", a, b)
	}
	m := oneStreamModel(t, cfg, NewParams(cfg, 1))
	if _, err := m.StreamCosts(DefaultCost, 0.9); !errors.Is(err, ErrConfig) {
		t.Errorf("StreamCosts(split 0.9) = %v, want ErrConfig", err)
	}
}
