package cli

import (
	"fmt"

	"gptlab/experiments/arena"
	"gptlab/experiments/checkpoint"
	"gptlab/experiments/dataparallel"
	"gptlab/experiments/gpt"
	"gptlab/experiments/lab"
	"gptlab/experiments/precision"
	"gptlab/experiments/reuse"
	"gptlab/experiments/serving"
	"gptlab/experiments/servingengine"
	"gptlab/experiments/tensorparallel"
)

// labs is every lab of the design, in the order gptlab list, help, the
// exit gate and the README show them: this list is the only one. A lab
// not built yet is named here with its one line, and refused when run.
var labs = []*lab.Lab{
	gpt.Lab,
	reuse.Lab,
	arena.Lab,
	checkpoint.Lab,
	precision.Lab,
	lab.Planned("quantize", "int8 per-channel weight quantization: quality, memory, latency"),
	dataparallel.Lab,
	tensorparallel.Lab,
	serving.Lab,
	servingengine.Lab,
}

// Labs returns every lab in the design's order, built or not.
func Labs() []*lab.Lab { return labs }

// Find returns the lab with that name.
func Find(name string) (*lab.Lab, error) {
	for _, l := range labs {
		if l.Name == name {
			return l, nil
		}
	}
	return nil, fmt.Errorf("unknown lab %q (gptlab list shows them)", name)
}
