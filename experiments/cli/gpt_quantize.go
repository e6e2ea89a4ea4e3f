package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"gptlab/experiments/lab"
	"gptlab/internal/qgemm"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// This file holds `gptlab gpt quantize` and what gpt eval and gpt sample
// do with its int8 checkpoints.

func init() {
	RegisterCommand(&Command{
		Name:  "gpt quantize",
		Usage: "--model CKPT --out Q [--set key=value ...] [--format F]",
		Short: "write a checkpoint's int8 model: linear weights as I8 codes with F32 scales beside them",
		Long: "The attention's c_attn and c_proj and the MLP's c_fc and c_proj become int8 under the scheme " +
			"(channel: one scale per output channel, tensor: one per matrix, block32: one per 32 inputs of a channel; " +
			"scale max|w|/127, round to nearest with ties to even, codes in [-127, 127]); with head=int8 the tied " +
			"head, and so the token embedding, too. The embeddings, LayerNorms and biases stay float32. " +
			"gpt eval and gpt sample read the result and run it int8.",
		Setup: gptQuantizeCommand,
		Help: func(w io.Writer) {
			fmt.Fprintln(w, "settings (--set key=value):")
			settingsTable(&gptQuantizeConfig{}, nil).WriteText(w, reports.Width)
		},
	})
}

// gptQuantizeConfig are the settings of `gptlab gpt quantize`.
type gptQuantizeConfig struct {
	Scheme precision.Int8Scheme `set:"scheme" help:"which weights share a scale: channel (per output channel), tensor or block32"`
	Head   string               `set:"head" help:"the tied head (and token embedding): f32, or int8"`
}

func gptQuantizeCommand(fs *flag.FlagSet) Runner {
	var sets lab.SetFlag
	fs.Var(&sets, "set", "`key=value`: scheme=channel|tensor|block32, head=f32|int8 (listed below)")
	model := fs.String("model", "", "training checkpoint `CKPT`: model.safetensors of gpt train --out")
	out := fs.String("out", "", "int8 checkpoint `Q` to write (a .safetensors file)")
	format := fs.String("format", "table", "output format `F`: table, markdown, json or csv")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if err := noArgs("gpt quantize", args); err != nil {
			return err
		}
		qc := gptQuantizeConfig{Head: "f32"}
		if err := lab.ApplySets(&qc, sets); err != nil {
			return err
		}
		switch {
		case *model == "":
			return lab.Usagef("gpt quantize: --model is required")
		case *out == "":
			return lab.Usagef("gpt quantize: --out is required")
		case qc.Head != "f32" && qc.Head != "int8":
			return lab.Usagef("gpt quantize: --set head=%s: want f32 or int8", qc.Head)
		case sameFile(*model, *out):
			return lab.Usagef("gpt quantize: --out %s is the --model file: write the int8 checkpoint beside it", *out)
		}
		if err := checkReportFlags(*format, ""); err != nil {
			return err
		}
		if err := checkOutFile("gpt quantize --out", *out); err != nil {
			return err
		}
		c, err := models.QuantizeCheckpoint(*model, models.QuantizeOptions{Scheme: qc.Scheme, Head: qc.Head == "int8"})
		if err != nil {
			return lab.Usagef("gpt quantize: --model: %v", err)
		}
		if err := c.Save(*out); err != nil {
			return lab.Usagef("gpt quantize: --out %s: %v", *out, err)
		}
		back, err := models.LoadInt8Checkpoint(*out)
		if err != nil {
			return fmt.Errorf("gpt quantize: the file just written: %w", err)
		}
		r := quantizeReport(c, back, *model, *out)
		r.Config = lab.Values(&qc)
		r.Config.Set("model", *model)
		r.Config.Set("out", *out)
		return emit(r, *format, "", stdout)
	}
}

// sameFile reports whether two paths name the same file.
func sameFile(a, b string) bool {
	x, errA := filepath.Abs(a)
	y, errB := filepath.Abs(b)
	return errA == nil && errB == nil && x == y
}

// quantizeReport is what gpt quantize wrote: the bytes of the linear
// weights and of the model both ways, and each matrix's SQNR.
func quantizeReport(c, back *models.Int8Checkpoint, model, out string) *reports.Report {
	q := c.Model
	deq := q.Dequantize()
	f32, i8 := deq.Bytes(), q.Bytes()
	r := reports.New("gpt-quantize", fmt.Sprintf("int8 checkpoint %s of %s (%s)", out, model, q.Options.Scheme))
	r.Metric("linear_weight_bytes_f32", f32.Linear)
	r.Metric("linear_weight_bytes_int8", i8.Linear)
	r.Metric("weight_bytes_f32", f32.Total())
	r.Metric("weight_bytes_int8", i8.Total())
	t := r.AddTable("Quantized matrices", reports.Text("tensor"), reports.Text("shape"), reports.Bytes("f32"),
		reports.Bytes("int8+scales"), reports.Float("SQNR dB", 1))
	for i, name := range q.Names() {
		x := q.Tensor(name)
		t.Row(name, fmt.Sprintf("%d×%d", x.Rows, x.Cols), int64(4*x.Rows*x.Cols), x.Bytes(), c.SQNR[i])
	}
	t.Note("Codes are one byte each (I8), the scales four (F32), %s. The float32 part (embeddings, LayerNorms, biases) is %s either way. SQNR is 10·log10(Σw²/Σ(w−q·scale)²) of each matrix against the checkpoint's float32 weights.",
		schemeWords(q.Options.Scheme), reports.FormatBytes(float64(i8.Rest)))
	ratio := float64(f32.Linear) / float64(i8.Linear)
	r.Metric("linear_weight_ratio", ratio)
	r.Check("linear weights smaller", ratio > 1, "%.3fx (%d → %d bytes, scales included)", ratio, f32.Linear, i8.Linear)
	same := slices.Equal(back.Model.Names(), q.Names()) && slices.Equal(back.Model.Params().Data(), q.Params().Data())
	for _, name := range q.Names() {
		a, b := q.Tensor(name), back.Model.Tensor(name)
		same = same && b != nil && slices.Equal(a.Codes(), b.Codes()) && slices.Equal(a.Scales, b.Scales)
	}
	r.Check("the file reads back", same, "%s: %d int8 tensors and the float32 part, equal to what was written", out, len(q.Names()))
	r.Note("Rounding: %s, codes in [-127, 127]; gpt eval and gpt sample run it with the %s kernel (%s).", precision.Int8Rounding, models.Int8Dynamic, qgemm.Kernels())
	return r
}

// schemeWords says which weights share a scale under s.
func schemeWords(s precision.Int8Scheme) string {
	switch s {
	case precision.Int8PerTensor:
		return "one scale per matrix"
	case precision.Int8PerBlock32:
		return "one scale per 32 inputs of an output channel"
	}
	return "one scale per output channel"
}

// gptEvalInt8 is gpt eval of an int8 checkpoint: its model run int8 (the
// dynamic kernel) on the validation batches its float32 model's
// evaluation sees.
func gptEvalInt8(ctx context.Context, c *models.Int8Checkpoint, ec gptEvalConfig, model, format, out string, stdout io.Writer) error {
	mc := c.Model.Config()
	data, err := gptEvalData(ec, c.LoadData, c.Vocab, mc.Block)
	if err != nil {
		return err
	}
	batches := c.EvalBatches
	if ec.EvalBatches > 0 {
		batches = ec.EvalBatches
	}
	t0 := time.Now()
	var vals []float64
	if err := untilInterrupted(ctx, func() (err error) { vals, err = c.ValLosses(data, batches, models.Int8Dynamic); return err }); err != nil {
		return err
	}
	r := reports.New("gpt-eval", fmt.Sprintf("Validation loss of %s (int8, %s) on %s", model, int8Words(c), data.Name))
	evalReport(r, vals, time.Since(t0), mc, c.Step, data, models.OracleLosses(data, mc, c.Seed, batches))
	r.Config.Set("data", data.Name)
	for _, k := range []struct {
		key string
		v   int
	}{{"vocab", mc.Vocab}, {"block", mc.Block}, {"layers", mc.Layers}, {"heads", mc.Heads}, {"embd", mc.Embd}, {"batch", mc.Batch}, {"eval-batches", batches}} {
		r.Config.Set(k.key, k.v)
	}
	r.Config.Set("weights", "int8")
	r.Config.Set("scheme", c.Model.Options.Scheme.String())
	r.Config.Set("head", map[bool]string{false: "f32", true: "int8"}[c.Model.Options.Head])
	r.Config.Set("int8-kernel", models.Int8Dynamic.String()+"/"+qgemm.Path())
	r.Config.Set("model", model)
	r.Note("The model runs int8: its linear layers multiply int8 weights (%s) by activations quantized per row at run time (%s).", int8Words(c), qgemm.Kernels())
	return emit(r, format, out, stdout)
}

// int8Words says how a checkpoint is quantized: "per-channel scales,
// head f32".
func int8Words(c *models.Int8Checkpoint) string {
	head := "head f32"
	if c.Model.Options.Head {
		head = "head int8"
	}
	return c.Model.Options.Scheme.String() + " scales, " + head
}

// sampleModel is what gpt sample runs of the checkpoint at path: a
// training checkpoint's float32 model, or an int8 checkpoint's int8 one
// (the dynamic kernel), which it says on stderr.
func sampleModel(path string, stderr io.Writer) (*models.Params, *models.Tokenizer, []models.ModelOption, error) {
	c, err := models.LoadInt8Checkpoint(path)
	switch {
	case errors.Is(err, models.ErrNotInt8):
		ck, err := models.LoadCheckpoint(path)
		if err != nil {
			return nil, nil, nil, lab.Usagef("gpt sample: --model: %v", err)
		}
		return ck.Params, ck.Tokenizer(), nil, nil
	case err != nil:
		return nil, nil, nil, lab.Usagef("gpt sample: --model: %v", err)
	}
	fmt.Fprintf(stderr, "gpt sample: int8 model (%s), %s kernel (%s)\n", int8Words(c), models.Int8Dynamic, qgemm.Path())
	return c.Model.Params(), c.Tokenizer(), []models.ModelOption{models.WithInt8(c.Model, models.Int8Dynamic)}, nil
}
