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

// Buckets of gradients all-reduced as they become final, while the
// backward goes on: each bucket's handle is waited on before the update
// reads it.
func ExampleComm_AllReduceAsync() {
	c, _ := parallel.Join(context.Background(), parallel.Env{WorldSize: 1}, parallel.Options{})
	defer c.Close()
	buckets := [][]float32{{1, 2}, {3}, {4, 5, 6}}
	var pending []*parallel.Handle
	for _, b := range buckets { // in the order the backward finishes them
		pending = append(pending, c.AllReduceAsync(b))
	}
	for i, h := range pending {
		if err := h.Wait(); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("bucket", i, buckets[i])
	}
	// Output:
	// bucket 0 [1 2]
	// bucket 1 [3]
	// bucket 2 [4 5 6]
}

// ZeRO-1: reduce-scatter the gradient, update this rank's segment of the
// parameters, all-gather the parameters.
func ExampleComm_ReduceScatter() {
	c, _ := parallel.Join(context.Background(), parallel.Env{WorldSize: 1}, parallel.Options{})
	defer c.Close()
	params := []float32{1, 1, 1, 1}
	grad := []float32{0.5, 0.5, 0.5, 0.5}
	if err := c.ReduceScatter(grad); err != nil {
		fmt.Println(err)
		return
	}
	lo, hi := c.Segment(len(grad))
	for i := lo; i < hi; i++ { // this rank's shard, with its shard of the optimizer state
		params[i] -= 0.1 * grad[i]
	}
	if err := c.AllGather(params); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(params)
	// Output: [0.95 0.95 0.95 0.95]
}
