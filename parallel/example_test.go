package parallel_test

import (
	"context"
	"fmt"

	"gptlab/parallel"
)

// A one-rank world needs no network: every collective is the identity.
// Under `gptlab launch --nproc N` the same code runs on N ranks, with Env
// from parallel.FromEnv().
func ExampleJoin() {
	c, err := parallel.Join(context.Background(), parallel.Env{WorldSize: 1}, parallel.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	grad := []float32{1, 2, 3}
	h := c.AllReduceAsync(grad) // overlaps with whatever runs next
	if err := h.Wait(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Rank(), c.Size(), c.Transport(), grad, c.Stats().Of(parallel.AllReduce).Calls)
	// Output: 0 1 self [1 2 3] 1
}

// Segment is how reduce-scatter and all-gather cut a buffer.
func ExampleSegment() {
	for i := range 3 {
		lo, hi := parallel.Segment(10, 3, i)
		fmt.Printf("rank %d: [%d, %d)\n", i, lo, hi)
	}
	// Output:
	// rank 0: [0, 4)
	// rank 1: [4, 7)
	// rank 2: [7, 10)
}

// The ring model of the bytes one rank sends in an all-reduce.
func ExampleRingBytes() {
	fmt.Println(parallel.RingBytes(16<<20, 2), parallel.RingBytes(16<<20, 4))
	// Output: 1.6777216e+07 2.5165824e+07
}
