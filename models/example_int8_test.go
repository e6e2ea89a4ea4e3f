package models_test

import (
	"fmt"
	"math"
	"slices"

	"gptlab/models"
	"gptlab/planner/arena"
	"gptlab/precision"
)

// Quantize makes the linear layers' weights int8, one scale per output
// channel. Tiny has two blocks of four matrices, 12·32·32 weights a block:
// 98,304 bytes in float32; int8 keeps a byte a weight and four a channel
// (2·(96+32+128+32) channels), 24,576 + 2,304 = 26,880 bytes. The int8
// model's graph reads the codes as int8 inputs, one byte each.
func ExampleQuantize() {
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 1)
	q, _ := models.Quantize(p, models.QuantizeOptions{Scheme: precision.Int8PerChannel})
	fmt.Println("int8 tensors:", len(q.Names()))
	fmt.Printf("linear weights: %d -> %d bytes\n", p.Bytes().Linear, q.Bytes().Linear)
	m, _ := models.NewModel(cfg, q.Params(), 1, cfg.Block, false, models.WithInt8(q, models.Int8Dynamic))
	defer m.Close()
	fmt.Println("int8 bytes the graph reads:", m.InputBytes()[arena.Int8])
	// Output:
	// int8 tensors: 8
	// linear weights: 98304 -> 26880 bytes
	// int8 bytes the graph reads: 24576
}

// WithInt8 builds any of the model's graphs on the int8 weights: the
// KV-cached decoder's step gives the logits of the int8 model's full
// window, to float32 rounding (the weight-only kernel multiplies one row,
// a decode step, by its own GEMV and longer inputs by the float32 GEMM,
// which sum in other orders).
func ExampleWithInt8() {
	cfg, _ := models.Preset("tiny")
	q, _ := models.Quantize(models.NewParams(cfg, 1), models.QuantizeOptions{})
	opt := models.WithInt8(q, models.Int8WeightOnly)
	d, _ := models.NewDecoder(q.Params(), 1, opt)
	defer d.Close()
	d.Append([]int32{5, 9, 2})
	step, _ := d.Append([]int32{7})
	step = slices.Clone(step)
	m, _ := models.NewModel(cfg, q.Params(), 1, 4, false, opt)
	defer m.Close()
	m.Step([]int32{5, 9, 2, 7}, nil)
	full, diff := m.Logits()[3*cfg.Vocab:], 0.0
	for i := range step {
		diff = max(diff, math.Abs(float64(step[i]-full[i])))
	}
	fmt.Println("decode step within 1e-5 of the full window:", diff <= 1e-5)
	// Output:
	// decode step within 1e-5 of the full window: true
}
