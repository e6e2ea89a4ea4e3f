package models

import (
	"fmt"
	"math"

	"gptlab/internal/par"
	"gptlab/internal/vec"
)

// AdamWConfig holds the optimizer's hyperparameters; DefaultAdamW gives the
// reference's.
type AdamWConfig struct {
	LR          float64 // learning rate used when Step is given lr <= 0
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64 // applied to parameters with two or more dimensions only
	GradClip    float64 // clip the global gradient norm to this; 0 disables
}

// DefaultAdamW is the reference's optimizer: lr 1e-3, betas (0.9, 0.95),
// eps 1e-8, weight decay 0.1 on 2-D weights, no clipping.
func DefaultAdamW() AdamWConfig {
	return AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
}

// AdamW is torch.optim.AdamW (single-tensor path, no amsgrad) over a
// Params: per step t, for each parameter with gradient g,
//
//	p *= 1 - lr*wd                     (decoupled decay, 2-D weights only)
//	m = b1*m + (1-b1)*g
//	v = b2*v + (1-b2)*g²
//	p -= (lr/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
//
// with the tensors in float32 and the scalar bias corrections in float64,
// as torch computes them on the CPU. The moments are laid out like
// Params.Data. A step allocates nothing.
//
// The update is elementwise, so it is split over the worker pool in
// fixed chunks of the flat parameter array: the result does not depend on
// the split.
type AdamW struct {
	cfg    AdamWConfig
	params *Params
	base   int       // the first element of Params.Data it updates (a shard's start)
	m, v   []float32 // the moments of the elements it updates
	step   int64
	decay  []bool // per parameter, in Names order

	flat  []float32  // the gradients of a step, laid out like Params.Data
	grad  []float32  // the gradient the running update reads (flat, or StepFlat's)
	split *par.Split // the update over rows of adamwGrain elements
	cur   vec.AdamW  // this step's scalars, read by the split (Decay: of the weights that decay)
	// Step's gradients where the model's step left them, per parameter
	// its pieces in order (one, or c_attn's three row blocks), read by
	// the split in place of grad; rowSq the Σg² of each row of the split.
	parts [][][]float32
	rowSq []float64
}

// adamwGrain is the elements of one row of the update's split.
const adamwGrain = 4096

// NewAdamW makes an optimizer for p with zero moments.
func NewAdamW(p *Params, o AdamWConfig) *AdamW {
	a, _ := NewAdamWShard(p, o, 0, p.Count())
	return a
}

// NewAdamWShard makes an optimizer of the elements [lo, hi) of
// Params.Data only, with moments for those alone: ZeRO-1's share of one
// rank. Its StepShard takes the gradient of those elements; every element
// gets bitwise the update the whole optimizer would give it.
func NewAdamWShard(p *Params, o AdamWConfig, lo, hi int) (*AdamW, error) {
	if lo < 0 || hi > p.Count() || lo > hi {
		return nil, fmt.Errorf("adamw: shard [%d, %d) of %d parameters", lo, hi, p.Count())
	}
	n := hi - lo
	rows := (n + adamwGrain - 1) / adamwGrain
	a := &AdamW{cfg: o, params: p, base: lo, m: make([]float32, n), v: make([]float32, n), flat: make([]float32, p.Count()),
		parts: make([][][]float32, len(p.Names())), rowSq: make([]float64, rows)}
	for _, name := range p.Names() {
		a.decay = append(a.decay, p.Decays(name))
	}
	a.split = par.New(rows, adamwGrain, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			a.updateRange(r, r*adamwGrain, min(r*adamwGrain+adamwGrain, n))
		}
	})
	return a, nil
}

// StateBytes is the bytes of the optimizer's moments.
func (a *AdamW) StateBytes() int64 { return int64(len(a.m)+len(a.v)) * 4 }

// Config is the optimizer's configuration.
func (a *AdamW) Config() AdamWConfig { return a.cfg }

// Step applies one update with the model's gradients of the last
// training Step, at learning rate lr (lr <= 0 means the config's LR). It
// returns the global gradient norm before clipping.
//
// Without clipping it reads the gradients where the step left them, each
// row of its split summing the squares of its piece of them on the way
// (no copy, no pass of its own: 0.36 of the baby step's 0.63-0.70 ms of
// AdamW on two cores were the copy and the norm's serial pass): the same
// update, bit for bit, as StepFlat on Gradients' copy, and the same norm
// to float64 rounding (its squares added row by row). With clipping,
// which needs the norm first, it is StepFlat on Gradients' copy.
func (a *AdamW) Step(m *Model, lr float64) (float64, error) {
	if a.cfg.GradClip > 0 || a.base != 0 {
		g, err := a.Gradients(m)
		if err != nil {
			return 0, err
		}
		return a.StepFlat(g, lr)
	}
	if err := a.gradParts(m); err != nil {
		return 0, err
	}
	return a.stepParts(lr), nil
}

// gradParts points the optimizer's pieces at m's gradients of its last
// Step.
func (a *AdamW) gradParts(m *Model) error {
	if err := a.checkModel(m); err != nil {
		return err
	}
	p := a.params
	for i, gp := range m.grads {
		a.parts[i] = a.parts[i][:0]
		n := 0
		for _, node := range gp.nodes {
			g := m.f32Value(node)
			a.parts[i] = append(a.parts[i], g)
			n += len(g)
		}
		if n != len(p.slice(i)) {
			return fmt.Errorf("adamw: %d gradient values of %s, want %d (no Step run?)", n, p.names[i], len(p.slice(i)))
		}
	}
	return nil
}

// stepParts is the update with the gradients of gradParts, no clipping;
// it returns the global norm.
func (a *AdamW) stepParts(lr float64) float64 {
	a.update(nil, lr, 0) // no clipping: the update does not read the norm
	sq := 0.0
	for _, s := range a.rowSq {
		sq += s
	}
	return math.Sqrt(sq)
}

// checkModel fails unless m is a training model over the optimizer's
// parameters.
func (a *AdamW) checkModel(m *Model) error {
	if m.params != a.params {
		return fmt.Errorf("adamw: the model reads other parameters than the optimizer updates")
	}
	if !m.train {
		return fmt.Errorf("adamw: the model has no gradients (built with train=false)")
	}
	return nil
}

// Gradients copies the model's gradients of the last training Step into
// the optimizer's flat gradient, laid out like Params.Data, and returns it
// (the optimizer's own slice, valid until the next call): what a caller
// may change (scale, all-reduce) before StepFlat applies it.
func (a *AdamW) Gradients(m *Model) ([]float32, error) {
	if err := a.checkModel(m); err != nil {
		return nil, err
	}
	p := a.params
	for i, n := range p.names {
		copy(a.flat[p.offsets[i]:p.offsets[i]+len(p.slice(i))], m.Grad(n))
	}
	return a.flat, nil
}

// StepFlat applies one update with gradients laid out like Params.Data
// (for example after an all-reduce). It returns the global gradient norm
// before clipping.
func (a *AdamW) StepFlat(grad []float32, lr float64) (float64, error) {
	if len(grad) != len(a.m) || a.base != 0 {
		return 0, fmt.Errorf("adamw: %d gradient values, want %d (StepShard for a shard)", len(grad), len(a.m))
	}
	_, sq := vec.Moments(grad) // Σg² in float64
	return a.update(grad, lr, sq), nil
}

// StepShard applies one update to a shard's elements with their gradient
// (grad[i] is element lo+i's), where sumSq is Σg² over the whole gradient
// (for clipping: the ranks' shards' sums, added). It returns the global
// norm.
func (a *AdamW) StepShard(grad []float32, lr, sumSq float64) (float64, error) {
	if len(grad) != len(a.m) {
		return 0, fmt.Errorf("adamw: %d gradient values for a shard of %d", len(grad), len(a.m))
	}
	return a.update(grad, lr, sumSq), nil
}

func (a *AdamW) update(grad []float32, lr, sq float64) float64 {
	if lr <= 0 {
		lr = a.cfg.LR
	}
	norm := math.Sqrt(sq)
	clip := float32(1)
	if a.cfg.GradClip > 0 {
		// torch.nn.utils.clip_grad_norm_: coef = max_norm/(norm+1e-6), clamped to 1.
		if c := a.cfg.GradClip / (norm + 1e-6); c < 1 {
			clip = float32(c)
		}
	}
	a.step++
	t := float64(a.step)
	bc1 := 1 - math.Pow(a.cfg.Beta1, t)
	bc2 := 1 - math.Pow(a.cfg.Beta2, t)
	a.cur = vec.AdamW{
		Decay: float32(1 - lr*a.cfg.WeightDecay), Clip: clip, StepSize: float32(lr / bc1), Bc2Sqrt: float32(math.Sqrt(bc2)),
		B1: float32(a.cfg.Beta1), B2: float32(a.cfg.Beta2), C1: float32(1 - a.cfg.Beta1), C2: float32(1 - a.cfg.Beta2),
		Eps: float32(a.cfg.Eps),
	}
	a.grad = grad
	a.split.Run()
	a.grad = nil
	return norm
}

// updateRange updates the optimizer's elements [lo, hi), row r of its
// split (element base+i of Params.Data is its i), which may span several
// parameters (each with its own weight decay), reading the gradient from
// grad or, without it, from Step's pieces, whose squares it sums into
// rowSq[r].
func (a *AdamW) updateRange(r, lo, hi int) {
	p := a.params
	glo, ghi := a.base+lo, a.base+hi
	a.rowSq[r] = 0
	for i := range p.names {
		start, end := p.offsets[i], p.offsets[i]+len(p.slice(i))
		if end <= glo || start >= ghi {
			continue
		}
		from, to := max(start, glo), min(end, ghi)
		s := a.cur
		if !a.decay[i] || a.cfg.WeightDecay == 0 {
			s.Decay = 1 // w*1 is w, bit for bit
		}
		l, h := from-a.base, to-a.base
		if a.grad != nil {
			s.Update(p.data[from:to], a.grad[l:h], a.m[l:h], a.v[l:h])
			continue
		}
		off := start // Params.Data's index of the piece's first element
		for _, g := range a.parts[i] {
			pl, ph := max(from, off), min(to, off+len(g))
			if pl < ph {
				_, ss := vec.Moments(g[pl-off : ph-off])
				a.rowSq[r] += ss
				s.Update(p.data[pl:ph], g[pl-off:ph-off], a.m[pl-a.base:ph-a.base], a.v[pl-a.base:ph-a.base])
			}
			off += len(g)
		}
	}
}

// StepCount is the number of updates applied so far (t).
func (a *AdamW) StepCount() int64 { return a.step }

// State returns the moments (laid out like Params.Data; the optimizer's
// own slices) and the step count, for a checkpoint.
func (a *AdamW) State() (m, v []float32, step int64) { return a.m, a.v, a.step }

// SetState restores moments and step count saved from State.
func (a *AdamW) SetState(m, v []float32, step int64) error {
	if len(m) != len(a.m) || len(v) != len(a.v) {
		return fmt.Errorf("adamw state: %d and %d moments, want %d", len(m), len(v), len(a.m))
	}
	if step < 0 {
		return fmt.Errorf("adamw state: step %d < 0", step)
	}
	copy(a.m, m)
	copy(a.v, v)
	a.step = step
	return nil
}
