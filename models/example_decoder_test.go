package models_test

import (
	"fmt"
	"slices"

	"gptlab/models"
)

// A decoder prefills a prompt into its KV cache and then decodes one token
// at a time; the logits of each step equal those of running the whole
// window again.
func ExampleDecoder() {
	cfg, _ := models.Preset("tiny")
	p := models.NewParams(cfg, 1)
	d, _ := models.NewDecoder(p, 1)
	defer d.Close()
	window := []int32{5, 9, 2}
	d.Append(window)                // prefill: positions 0-2
	step, _ := d.Append([]int32{7}) // decode: position 3, reading the cache
	step = slices.Clone(step)
	window = append(window, 7)
	m, _ := models.NewModel(cfg, p, 1, len(window), false)
	defer m.Close()
	m.Step(window, nil)
	full := m.Logits()[(len(window)-1)*cfg.Vocab:]
	fmt.Println("tokens held:", d.Len())
	fmt.Println("decode step equals the full window:", slices.Equal(step, full))
	// Output:
	// tokens held: 4
	// decode step equals the full window: true
}

// The forward as a chain of segments, each of which can be compiled and
// differentiated on its own (models.NewUnit).
func ExampleChain() {
	cfg, _ := models.Preset("tiny")
	fmt.Println(models.Chain(cfg))
	// Output:
	// [embed attn 0 mlp 0 attn 1 mlp 1 head]
}
