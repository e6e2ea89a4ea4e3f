package models_test

import (
	"fmt"

	"gptlab/models"
	"gptlab/precision"
)

// A training step under the bf16 policy keeps its saved activations as
// 16-bit buffers in the planned arena: about half the bytes of f32's.
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
