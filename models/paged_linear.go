package models

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gorgonia.org/tensor"

	"gptlab/internal/pgemm"
	"gptlab/internal/qgemm"
	"gptlab/internal/vec"
)

// paged_linear.go: the linear layers of the paged forward, y = x·Wᵀ + b
// over the stacked rows of a ragged batch. The weights are packed once
// for internal/pgemm's kernels where they run (AVX-512, or AVX2 with FMA): no call packs
// anything, and a decode step's few rows cost no idle tile rows. Elsewhere
// (or with GPTLAB_PGEMM=off) the products go to the BLAS every graph of
// the process uses (blas.go).

// PagedKernel names what runs the paged forward's linear layers:
// "pgemm/avx512", "pgemm/avx2" or the BLAS (BLAS()).
func PagedKernel() string {
	if pgemm.Available() {
		return "pgemm/" + pgemm.Kernel()
	}
	return BLAS()
}

// pagedLinear is one linear layer: W [out, in] (read in place by the BLAS,
// or packed, or int8), bias (out).
type pagedLinear struct {
	w, b    []float32
	in, out int
	packed  *pgemm.Packed  // nil: the BLAS
	int8    *qgemm.Weights // non-nil: an int8 model's matrix, multiplied by kernel
	kernel  Int8Kernel
}

// apply writes y (N, out) = x (N, in)·Wᵀ + b.
func (l *pagedLinear) apply(y, x []float32, N int) {
	if N == 0 {
		return
	}
	switch {
	case l.int8 != nil && l.kernel == Int8Dynamic:
		qgemm.Dynamic(y[:N*l.out], x[:N*l.in], N, l.int8)
	case l.int8 != nil:
		qgemm.WeightOnly(y[:N*l.out], x[:N*l.in], N, l.int8)
	case l.packed != nil:
		l.packed.Mul(y, x, N)
	default:
		tensor.WhichBLAS().Sgemm(blas.NoTrans, blas.Trans, N, l.out, l.in, 1, x, l.in, l.w, l.in, 0, y, l.out)
	}
	if l.b != nil {
		vec.AddRow(y[:N*l.out], y[:N*l.out], l.b) // AddBias's kernel
	}
}

// pagedLayer is one transformer block's weights.
type pagedLayer struct {
	ln1w, ln1b, ln2w, ln2b []float32
	attn, proj, fc, mproj  pagedLinear
}

// pagedLinears are every weight of the paged forward.
type pagedLinears struct {
	layers     []pagedLayer
	lnfw, lnfb []float32
	head       pagedLinear // the tied embedding, no bias
}

// newPagedLinears lays out p's weights; with q (an int8 model whose
// float32 part is p) the linear layers' matrices are q's, multiplied by
// kernel.
func newPagedLinears(p *Params, q *Quantized, kernel Int8Kernel) pagedLinears {
	cfg := p.Config()
	C := cfg.Embd
	lin := func(name string, in, out int, bias bool) pagedLinear {
		l := pagedLinear{in: in, out: out}
		if t := int8Tensor(q, name+".weight"); t != nil {
			l.int8, l.kernel = t.Packed(), kernel
		} else {
			l.w = p.Slice(name + ".weight")
			l.pack()
		}
		if bias {
			l.b = p.Slice(name + ".bias")
		}
		return l
	}
	var pl pagedLinears
	for l := range cfg.Layers {
		pre := fmt.Sprintf("transformer.h.%d.", l)
		pl.layers = append(pl.layers, pagedLayer{
			ln1w: p.Slice(pre + "ln_1.weight"), ln1b: p.Slice(pre + "ln_1.bias"),
			ln2w: p.Slice(pre + "ln_2.weight"), ln2b: p.Slice(pre + "ln_2.bias"),
			attn:  lin(pre+"attn.c_attn", C, 3*C, true),
			proj:  lin(pre+"attn.c_proj", C, C, true),
			fc:    lin(pre+"mlp.c_fc", C, 4*C, true),
			mproj: lin(pre+"mlp.c_proj", 4*C, C, true),
		})
	}
	pl.lnfw, pl.lnfb = p.Slice("transformer.ln_f.weight"), p.Slice("transformer.ln_f.bias")
	pl.head = pagedLinear{w: p.Slice("transformer.wte.weight"), in: C, out: cfg.Vocab}
	pl.head.pack()
	return pl
}

// pack packs the weights when the kernels run: a copy, so a PagedModel
// reads the parameters as they were when it was made.
func (l *pagedLinear) pack() {
	if !pgemm.Available() {
		return
	}
	pk, err := pgemm.Pack(l.w, l.out, l.in)
	if err != nil {
		panic(err) // shapes come from the parameters' own
	}
	l.packed = pk
}

// int8Tensor is q's int8 tensor name, or nil (q nil: a float32 model).
func int8Tensor(q *Quantized, name string) *Int8Tensor {
	if q == nil {
		return nil
	}
	return q.Tensor(name)
}
