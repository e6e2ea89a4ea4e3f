package serving_test

import (
	"context"
	"fmt"

	"gptlab/serving"
)

// Example drives the continuous scheduler as a model engine does: each
// iteration it asks for the batch, "runs the model" (here it only invents
// the sampled tokens), and reports back. The two prompts share their first
// six tokens: the second maps the first's full block 0 from the prefix
// cache, shares two tokens of its block 1, and copies that block before
// writing its own third token into it (copy on write).
func Example() {
	blocks, _ := serving.NewBlocks(serving.BlockConfig{Size: 4, Device: 8, Caching: true})
	sched, _ := serving.NewContinuous(blocks, serving.ContinuousConfig{MaxSeqs: 4, MaxTokens: 16})
	a := serving.NewSeq(&serving.Request{ID: 0, Prompt: 8, Output: 2, Tokens: []int32{1, 2, 3, 4, 5, 6, 7, 8}})
	b := serving.NewSeq(&serving.Request{ID: 1, Prompt: 9, Output: 2, Tokens: []int32{1, 2, 3, 4, 5, 6, 70, 80, 90}})
	sched.Add(a)
	next := int32(100)
	for it := 1; sched.Live() > 0; it++ {
		if it == 2 {
			sched.Add(b) // arrives after the first iteration
		}
		batch := sched.Schedule()
		for _, c := range batch.Copies {
			fmt.Printf("iteration %d: copy block %d → %d (%d tokens)\n", it, c.Src, c.Dst, c.Tokens)
		}
		for i := range batch.Entries {
			e := &batch.Entries[i]
			fmt.Printf("iteration %d: request %d tokens [%d, %d) blocks %v", it, e.Seq.Req.ID, e.Start, e.Start+e.N, e.Seq.Table)
			if e.Sample {
				e.Token, next = next, next+1 // the model's sample
				fmt.Printf(" → token %d", e.Token)
			}
			fmt.Println()
		}
		sched.Complete(batch)
	}
	fmt.Println("outputs:", a.Out, b.Out, "blocks in use:", blocks.Used())
	// Output:
	// iteration 1: request 0 tokens [0, 8) blocks [0 1] → token 100
	// iteration 2: copy block 1 → 3 (2 tokens)
	// iteration 2: request 0 tokens [8, 9) blocks [0 1 2] → token 101
	// iteration 2: request 1 tokens [6, 9) blocks [0 3 4] → token 102
	// iteration 3: request 1 tokens [9, 10) blocks [0 3 4] → token 103
	// outputs: [100 101] [102 103] blocks in use: 0
}

// ExampleSimulate runs a generated workload through the simulator and
// prints vLLM's headline metrics.
func ExampleSimulate() {
	prompt, _ := serving.ParseLengths("uniform:64:256")
	output, _ := serving.ParseLengths("fixed:32")
	reqs, _ := serving.Workload{N: 200, Rate: 4, Prompt: prompt, Output: output, Seed: 1}.Generate()
	blocks, _ := serving.NewBlocks(serving.BlockConfig{Size: 16, Device: 256, Caching: true})
	sched, _ := serving.NewContinuous(blocks, serving.DefaultContinuous)
	res, _ := serving.Simulate(context.Background(), reqs, sched, serving.SimConfig{Cost: serving.DefaultCost})
	s := res.Rec.Summary(serving.SLO{TTFT: 0.5, TPOT: 0.05})
	fmt.Printf("completed %d, %.2f req/s, goodput %.2f req/s\n", s.Completed, s.RequestThroughput, s.Goodput)
	fmt.Printf("TTFT median %.1f ms, TPOT median %.1f ms\n", 1e3*s.TTFT.Median, 1e3*s.TPOT.Median)
	// Output:
	// completed 200, 4.00 req/s, goodput 4.00 req/s
	// TTFT median 29.0 ms, TPOT median 12.8 ms
}
