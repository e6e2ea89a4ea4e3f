package models_test

import (
	"fmt"

	"gptlab/models"
	"gptlab/precision"
)

// A training step under the bf16 policy keeps its saved activations as
// 16-bit buffers in the planned arena: about half the bytes of f32's.
//
// Why these numbers: tiny has B*T = 2*16 = 32 rows, C = 32, 4C = 128,
// V = 65, 2 heads of 16, 2 layers. What the backward reads of the forward
// is, in float32 (4 bytes an element; a (32, 32) or (4, 16, 16) value is
// 4,096 bytes):
//
//	attention half  x, ln_1(x), q, k, v (heads), the probabilities,
//	                the merged heads (c_proj's input): 7 × 4,096    = 28,672
//	MLP half        x, ln_2(x): 2 × 4,096; c_fc's output (GELU's
//	                input) and GELU's output (32, 128): 2 × 16,384  = 40,960
//	head            ln_f's input and output: 2 × 4,096; the logits
//	                (32, 65): 8,320                                  = 16,512
//
// 2 × (28,672 + 40,960) + 16,512 = 155,776 bytes. Under bf16 every one of
// them but the logits (the step's float32 output, which the caller reads)
// is a 2-byte copy: (155,776 − 8,320) / 2 = 73,728 bytes in 16-bit
// buffers, 73,728 + 8,320 = 82,048 in all, and 82,048 / 155,776 = 0.53.
func ExampleWithPrecision() {
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 1)
	saved := map[string]int64{}
	for _, name := range []string{"f32", "bf16"} {
		pol, _ := precision.ParsePolicy(name)
		m, err := models.NewModel(cfg, p, cfg.Batch, cfg.Block, true, models.WithPrecision(pol))
		if err != nil {
			fmt.Println(err)
			return
		}
		mem, _ := m.Memory()
		saved[name] = mem.Saved
		fmt.Printf("%s: saved activations %d bytes, %d of them in 16-bit buffers\n", name, mem.Saved, mem.Saved16)
	}
	fmt.Printf("bf16/f32: %.2f\n", float64(saved["bf16"])/float64(saved["f32"]))
	// Output:
	// f32: saved activations 155776 bytes, 0 of them in 16-bit buffers
	// bf16: saved activations 82048 bytes, 73728 of them in 16-bit buffers
	// bf16/f32: 0.53
}
