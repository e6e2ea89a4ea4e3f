package engine_test

import (
	"context"
	"fmt"

	"gptlab/engine"
	"gptlab/models"
)

// An engine runs its loop on one goroutine; requests are submitted from
// any other and stream their tokens back.
func Example() {
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 1)
	e, err := engine.New(p, engine.Config{BlockSize: 4, Blocks: 16, Policy: "continuous",
		MaxSeqs: 4, MaxTokens: 16, Chunked: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()

	events, err := e.Submit(context.Background(), engine.Request{Prompt: []int32{5, 9, 2}, MaxTokens: 6})
	if err != nil {
		fmt.Println(err)
		return
	}
	n := 0
	for ev := range events {
		if ev.Finish != "" {
			fmt.Println("finish:", ev.Finish, "after", n, "tokens")
			break
		}
		n++
	}
	_, err = e.Submit(context.Background(), engine.Request{Prompt: make([]int32, 12), MaxTokens: 8})
	fmt.Println(err)
	stop()
	fmt.Println("run:", <-done)
	// Output:
	// finish: length after 6 tokens
	// engine: request exceeds the context window: prompt of 12 tokens + max tokens 8 = 20, over the context window of 16
	// run: <nil>
}
