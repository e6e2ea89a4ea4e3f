package models

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gorgonia.org/tensor"
)

// Params holds every parameter of a GPT under nanoGPT's names, in
// nanoGPT's order, as float32 tensors that are views into one backing
// slice (Data). The head is tied to transformer.wte.weight and has no
// entry. Linear weights are [out, in].
type Params struct {
	cfg     Config
	data    []float32 // every parameter, in Names order
	names   []string
	shapes  [][]int
	offsets []int // offsets[i] is where parameter i starts in data
	index   map[string]int
	tensors []*tensor.Dense
}

// paramLayout lists the names and shapes of cfg's parameters in nanoGPT's
// named_parameters order.
func paramLayout(cfg Config) (names []string, shapes [][]int) {
	C := cfg.Embd
	add := func(n string, s ...int) {
		names = append(names, n)
		shapes = append(shapes, s)
	}
	add("transformer.wte.weight", cfg.Vocab, C)
	add("transformer.wpe.weight", cfg.Block, C)
	for l := 0; l < cfg.Layers; l++ {
		p := fmt.Sprintf("transformer.h.%d.", l)
		add(p+"ln_1.weight", C)
		add(p+"ln_1.bias", C)
		add(p+"attn.c_attn.weight", 3*C, C)
		add(p+"attn.c_attn.bias", 3*C)
		add(p+"attn.c_proj.weight", C, C)
		add(p+"attn.c_proj.bias", C)
		add(p+"ln_2.weight", C)
		add(p+"ln_2.bias", C)
		add(p+"mlp.c_fc.weight", 4*C, C)
		add(p+"mlp.c_fc.bias", 4*C)
		add(p+"mlp.c_proj.weight", C, 4*C)
		add(p+"mlp.c_proj.bias", C)
	}
	add("transformer.ln_f.weight", C)
	add("transformer.ln_f.bias", C)
	return names, shapes
}

// ZeroParams allocates cfg's parameters, all zero. It panics on an invalid
// config (call cfg.Validate first).
func ZeroParams(cfg Config) *Params {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return zeroParamsOf(cfg, nil)
}

// zeroParamsOf is ZeroParams holding only the parameters keep accepts
// (all of them when keep is nil): an int8 model's float32 part
// (Quantized.Params), without its quantized matrices.
func zeroParamsOf(cfg Config, keep func(name string) bool) *Params {
	all, allShapes := paramLayout(cfg)
	var names []string
	var shapes [][]int
	for i, n := range all {
		if keep == nil || keep(n) {
			names, shapes = append(names, n), append(shapes, allShapes[i])
		}
	}
	p := &Params{cfg: cfg, names: names, shapes: shapes, index: map[string]int{}}
	total := 0
	for i, s := range shapes {
		p.offsets = append(p.offsets, total)
		p.index[names[i]] = i
		total += prod(s)
	}
	p.data = make([]float32, total)
	for i, s := range shapes {
		p.tensors = append(p.tensors, tensor.New(tensor.WithShape(s...), tensor.WithBacking(p.slice(i))))
	}
	return p
}

// NewParams draws cfg's parameters from seed with the reference's
// distributions: biases 0, LayerNorm weights 1, c_proj weights
// normal(0, 0.02/sqrt(2*Layers)), every other weight normal(0, 0.02). The
// generator is this package's own (PCG), so the same seed gives the same
// parameters on every machine; it is not PyTorch's stream.
func NewParams(cfg Config, seed int64) *Params {
	p := ZeroParams(cfg)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	for i, n := range p.names {
		d := p.slice(i)
		switch {
		case strings.HasSuffix(n, ".bias"):
			// zero already
		case strings.Contains(n, ".ln_"):
			for j := range d {
				d[j] = 1
			}
		default:
			std := 0.02
			if strings.HasSuffix(n, "c_proj.weight") {
				std = 0.02 / math.Sqrt(2*float64(cfg.Layers))
			}
			for j := range d {
				d[j] = float32(rng.NormFloat64() * std)
			}
		}
	}
	return p
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func (p *Params) slice(i int) []float32 {
	return p.data[p.offsets[i] : p.offsets[i]+prod(p.shapes[i]) : p.offsets[i]+prod(p.shapes[i])]
}

// Config is the configuration the parameters were made for.
func (p *Params) Config() Config { return p.cfg }

// Names lists the parameter names in nanoGPT's order. Do not modify it.
func (p *Params) Names() []string { return p.names }

// Has reports whether name is a parameter.
func (p *Params) Has(name string) bool { _, ok := p.index[name]; return ok }

// Get returns the named parameter (a view into Data), or nil.
func (p *Params) Get(name string) *tensor.Dense {
	i, ok := p.index[name]
	if !ok {
		return nil
	}
	return p.tensors[i]
}

// Slice returns the named parameter's values (a view into Data), or nil.
func (p *Params) Slice(name string) []float32 {
	i, ok := p.index[name]
	if !ok {
		return nil
	}
	return p.slice(i)
}

// Shape returns the named parameter's shape, or nil.
func (p *Params) Shape(name string) []int {
	i, ok := p.index[name]
	if !ok {
		return nil
	}
	return append([]int(nil), p.shapes[i]...)
}

// Offset returns where the named parameter starts in Data, or -1.
func (p *Params) Offset(name string) int {
	i, ok := p.index[name]
	if !ok {
		return -1
	}
	return p.offsets[i]
}

// Data is the single backing slice of every parameter, in Names order.
func (p *Params) Data() []float32 { return p.data }

// Count is the number of scalar parameters (len(Data())).
func (p *Params) Count() int { return len(p.data) }

// Decays reports whether AdamW applies weight decay to the named
// parameter: the reference decays every parameter with two or more
// dimensions (embeddings and Linear weights), not biases or LayerNorm.
func (p *Params) Decays(name string) bool { return len(p.Shape(name)) >= 2 }

// Clone returns a deep copy.
func (p *Params) Clone() *Params {
	q := zeroParamsOf(p.cfg, p.Has)
	copy(q.data, p.data)
	return q
}

// CopyFrom copies q's values into p; the configs must have the same
// parameter layout.
func (p *Params) CopyFrom(q *Params) error {
	if len(p.names) != len(q.names) || len(p.data) != len(q.data) {
		return fmt.Errorf("copy params: layouts differ (%d tensors, %d values vs %d, %d)", len(q.names), len(q.data), len(p.names), len(p.data))
	}
	copy(p.data, q.data)
	return nil
}
