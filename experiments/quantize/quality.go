package quantize

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gptlab/models"
	"gptlab/precision"
)

// variant is one int8 model the quality section measures.
type variant struct {
	name   string
	q      *models.Quantized
	kernel models.Int8Kernel
}

// qualityRow is what one model scores against the float32 one on the
// validation batches.
type qualityRow struct {
	variant
	ppl    float64 // exp(mean loss)
	kl     float64 // mean KL(p_f32 ‖ p_int8) over every position
	top1   float64 // share of positions whose most likely token is the float32 model's
	greedy float64 // share of the greedy sample's tokens equal to the float32 model's
	diverg int     // the first token of the greedy sample that differs (Greedy when none)
	golden float64 // logits against the dequantized float32 model's: max |Δ| (weight-only) or normwise (dynamic)
}

// qualityResult is the quality section.
type qualityResult struct {
	pplF32  float64
	rows    []qualityRow
	sqnr    map[precision.Int8Scheme][]float64 // per int8 tensor, in Names order
	names   []string
	outlier outlierResult
}

// quality evaluates the float32 model and every int8 variant on the same
// validation batches.
func (ql *quantizeLab) quality(ctx context.Context) (*qualityResult, error) {
	res := &qualityResult{sqnr: map[precision.Int8Scheme][]float64{}}
	ref, err := ql.evaluate(ql.f32)
	if err != nil {
		return nil, err
	}
	res.pplF32 = math.Exp(mean(ref.losses))
	refText, err := ql.greedy(ql.f32)
	if err != nil {
		return nil, err
	}
	var vs []variant
	for _, s := range schemes {
		for _, k := range kernels {
			vs = append(vs, variant{name: s.String(), q: ql.q[s], kernel: k})
		}
		res.sqnr[s] = ql.q[s].SQNR(ql.f32)
	}
	res.names = ql.q[precision.Int8PerChannel].Names()
	vs = append(vs, variant{name: "channel+head", q: ql.qHead, kernel: models.Int8Dynamic})
	deq := map[*models.Quantized]*evalResult{}
	for _, v := range vs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		got, err := ql.evaluate(v.q.Params(), models.WithInt8(v.q, v.kernel))
		if err != nil {
			return nil, fmt.Errorf("%s %v: %w", v.name, v.kernel, err)
		}
		if deq[v.q] == nil {
			if deq[v.q], err = ql.evaluate(v.q.Dequantize()); err != nil {
				return nil, err
			}
		}
		text, err := ql.greedy(v.q.Params(), models.WithInt8(v.q, v.kernel))
		if err != nil {
			return nil, err
		}
		row := qualityRow{variant: v, ppl: math.Exp(mean(got.losses)), diverg: len(refText)}
		row.kl, row.top1 = compareLogits(ref.logits, got.logits, ql.tc.Model.Vocab)
		same := 0
		for i := range refText {
			if refText[i] == text[i] {
				same++
			} else if row.diverg == len(refText) {
				row.diverg = i
			}
		}
		row.greedy = float64(same) / float64(len(refText))
		if v.kernel == models.Int8WeightOnly {
			row.golden = maxAbsDiff(got.logits, deq[v.q].logits)
		} else {
			row.golden = relDiff(got.logits, deq[v.q].logits)
		}
		res.rows = append(res.rows, row)
	}
	res.outlier = ql.outlier()
	return res, nil
}

// evalResult is a model's loss and logits on each validation batch.
type evalResult struct {
	losses []float64
	logits []float32 // every batch's (B*T, V), one after the other
}

// evaluate runs a model of p (built with opts) on the validation batches.
func (ql *quantizeLab) evaluate(p *models.Params, opts ...models.ModelOption) (*evalResult, error) {
	mc := ql.tc.Model
	m, err := models.NewModel(mc, p, mc.Batch, mc.Block, false, opts...)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	res := &evalResult{}
	err = models.ValBatches(ql.data, mc, ql.tc.Seed, ql.cfg.EvalBatches, func(idx, tgt []int32) error {
		l, err := m.Step(idx, tgt)
		res.losses = append(res.losses, float64(l))
		res.logits = append(res.logits, m.Logits()...)
		return err
	})
	return res, err
}

// greedy is the model's greedy continuation (temperature 0) of the first
// 16 characters of the validation split, Greedy characters long, from the
// KV-cached decoder.
func (ql *quantizeLab) greedy(p *models.Params, opts ...models.ModelOption) ([]rune, error) {
	s, err := models.NewSampler(p, ql.data.Tok, opts...)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	prompt := ql.data.Tok.Decode(ql.data.Val[:min(16, len(ql.data.Val))])
	text, err := s.Generate(prompt, models.SampleConfig{Tokens: ql.cfg.Greedy, Temperature: 0})
	return []rune(text), err
}

// compareLogits is the mean KL(p_ref ‖ p_got) of the next-token
// distributions (softmax of each row of V logits, in float64) and the
// share of rows whose argmax agrees.
func compareLogits(ref, got []float32, V int) (kl, top1 float64) {
	rows := len(ref) / V
	lp, lq := make([]float64, V), make([]float64, V)
	agree := 0
	for r := range rows {
		a, b := ref[r*V:(r+1)*V], got[r*V:(r+1)*V]
		logSoftmax(lp, a)
		logSoftmax(lq, b)
		for i := range V {
			kl += math.Exp(lp[i]) * (lp[i] - lq[i])
		}
		if argmax(a) == argmax(b) {
			agree++
		}
	}
	return kl / float64(rows), float64(agree) / float64(rows)
}

// logSoftmax sets dst to log softmax(x) in float64.
func logSoftmax(dst []float64, x []float32) {
	m := float64(slices.Max(x))
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	ls := m + math.Log(s)
	for i, v := range x {
		dst[i] = float64(v) - ls
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// maxAbsDiff is max |a − b|.
func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// relDiff is ‖a − b‖₂ / ‖b‖₂.
func relDiff(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

// outlierResult is one channel's SQNR with and without an outlier.
type outlierResult struct {
	tensor        string
	channel, at   int
	factor        float64 // the outlier is factor × the channel's largest |w|
	without, with map[precision.Int8Scheme]float64
}

// outlierFactor is how far the injected outlier is above the channel's
// largest weight.
const outlierFactor = 20

// outlier quantizes channel 0 of the first MLP c_fc weight as it is, and
// with one weight (in the middle) set to outlierFactor × the channel's
// largest magnitude: the SQNR of the channel's other weights, per channel
// and per block of 32 (where the outlier costs only its block).
func (ql *quantizeLab) outlier() outlierResult {
	name := "transformer.h.0.mlp.c_fc.weight"
	cols := ql.f32.Shape(name)[1]
	row := slices.Clone(ql.f32.Slice(name)[:cols])
	res := outlierResult{tensor: name, at: cols / 2, factor: outlierFactor,
		without: map[precision.Int8Scheme]float64{}, with: map[precision.Int8Scheme]float64{}}
	amax := 0.0
	for _, v := range row {
		amax = max(amax, math.Abs(float64(v)))
	}
	spiked := slices.Clone(row)
	spiked[res.at] = float32(outlierFactor * amax)
	rest := func(w []float32) []float32 { return slices.Delete(slices.Clone(w), res.at, res.at+1) }
	for _, s := range []precision.Int8Scheme{precision.Int8PerChannel, precision.Int8PerBlock32} {
		for _, in := range []struct {
			w   []float32
			out map[precision.Int8Scheme]float64
		}{{row, res.without}, {spiked, res.with}} {
			q, sc, err := precision.QuantizeInt8(name, in.w, 1, cols, s)
			if err != nil {
				panic(err) // a trained weight is finite (the trainer checks)
			}
			d := make([]float32, cols)
			precision.DequantizeInt8(d, q, sc, 1, cols, s)
			in.out[s] = precision.SQNR(rest(row), rest(d))
		}
	}
	return res
}
