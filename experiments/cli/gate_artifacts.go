package cli

import (
	"fmt"
	"slices"
	"strings"

	"gptlab/reports"
)

// This file is the exit gate's first table: the chapter's five artifacts,
// each with the labs whose own checks give its verdict, the figures from
// those labs' metrics that make its case, and the command that reproduces
// it alone. A lab joins an artifact by one line of artifacts below.

// artifact is one row of the table.
type artifact struct {
	name     string
	labs     []string   // whose checks give the verdict, in order
	evidence []evidence // the figures that make the case
}

// evidence is one figure: a phrase made of some of a lab's metrics.
type evidence struct {
	lab     string
	metrics []string
	show    func(v []float64) string
}

// artifacts: the exit gate's artifacts, in the order of the chapter. A row
// whose labs are not built shows NOT BUILT (one built lab of two gives the
// verdict, the other is named NOT BUILT among the figures); a metric a row
// names must be in its lab's report (TestArtifactEvidence), never a blank.
// quantize (int8, a second precision optimization) and serving-engine (the
// scheduling experiment on the real model) join their rows' evidence by a
// line each when they are built.
var artifacts = []artifact{
	{name: "buffer reuse", labs: []string{"reuse", "arena"}, evidence: []evidence{
		{"arena", []string{"small_training_arena_bytes", "small_training_bound_bytes", "small_training_naive_bytes"},
			func(v []float64) string {
				return fmt.Sprintf("small GPT's training step: arena %s against the lower bound %s (naive %s)",
					reports.FormatBytes(v[0]), reports.FormatBytes(v[1]), reports.FormatBytes(v[2]))
			}},
		{"reuse", []string{"random_search_max_ratio", "random_best_fit_max_ratio"},
			func(v []float64) string {
				return fmt.Sprintf("random instances: search at worst %.3fx the bound (best fit %.2fx)", v[0], v[1])
			}},
		{"reuse", []string{"minimalloc_fit", "minimalloc_instances"},
			func(v []float64) string {
				return fmt.Sprintf("MiniMalloc's benchmark: search fits %.0f of its %.0f instances in their capacity", v[0], v[1])
			}},
	}},
	{name: "checkpointing", labs: []string{"checkpoint"}, evidence: []evidence{
		{"checkpoint", []string{"grads_bitwise_equal"},
			func(v []float64) string {
				return "gradients bitwise equal under every policy, dropout on: " + yesNo(v[0] == 1)
			}},
		{"checkpoint", []string{"peak_bytes_none", "peak_bytes_sqrt", "step_time_ratio_sqrt"},
			func(v []float64) string {
				return fmt.Sprintf("sqrt cuts the peak %.2fx (%s to %s) at %.2fx the step time",
					v[0]/v[1], reports.FormatBytes(v[0]), reports.FormatBytes(v[1]), v[2])
			}},
		{"checkpoint", []string{"peak_bytes_selective", "step_time_ratio_selective"},
			func(v []float64) string {
				return fmt.Sprintf("selective: peak %s at %.2fx the step time", reports.FormatBytes(v[0]), v[1])
			}},
	}},
	{name: "a measured precision optimization", labs: []string{"precision", "quantize"}, evidence: []evidence{
		{"precision", []string{"saved_activation_bytes_f32", "saved_activation_bytes_bf16", "saved_activation_ratio"},
			func(v []float64) string {
				return fmt.Sprintf("activation bytes saved, always: %s of %s (%.2fx f32's)",
					reports.FormatBytes(v[0]-v[1]), reports.FormatBytes(v[0]), v[2])
			}},
		{"precision", []string{"step_ms_f32", "step_ms_bf16", "gemm_hardware_shapes", "gemm_calibrated_shapes"},
			func(v []float64) string {
				return fmt.Sprintf("speed-up: step %.2fx f32's (%.2f against %.2f ms); %s",
					v[0]/v[1], v[1], v[0], fastPath(int(v[2]), int(v[3])))
			}},
		{"precision", []string{"val_loss_f32", "val_loss_bf16"},
			func(v []float64) string {
				return fmt.Sprintf("quality: val loss %.4f against f32's %.4f (%+.2f%%)", v[1], v[0], 100*(v[1]/v[0]-1))
			}},
		{"quantize", []string{"linear_weight_bytes_f32", "linear_weight_bytes_int8", "val_ppl_f32", "val_ppl_int8", "top1_agreement"},
			func(v []float64) string {
				return fmt.Sprintf("int8 linear weights %.2fx smaller (%s to %s), perplexity %+.3f%%, top-1 agreement %.2f%%",
					v[0]/v[1], reports.FormatBytes(v[0]), reports.FormatBytes(v[1]), 100*(v[3]/v[2]-1), 100*v[4])
			}},
		{"quantize", []string{"m1_latency_ratio_int8_vs_f32", "m64_latency_ratio_int8_vs_f32"},
			func(v []float64) string {
				return fmt.Sprintf("int8 linear layers at %.2fx f32's time at M=1, %.2fx at M=64", v[0], v[1])
			}},
	}},
	{name: "a verified parallel update", labs: []string{"data-parallel", "tensor-parallel"}, evidence: []evidence{
		{"data-parallel", []string{"param_max_abs_diff", "max_rel_diff_equal"},
			func(v []float64) string {
				return fmt.Sprintf("data parallel: parameters within %.2g of one process's (gradients %.2g relative)", v[0], v[1])
			}},
		{"data-parallel", []string{"bytes_sent_per_rank", "model_bytes_per_rank"},
			func(v []float64) string {
				return fmt.Sprintf("bytes sent a rank a step %s against the ring model's %s", reports.FormatBytes(v[0]), reports.FormatBytes(v[1]))
			}},
		{"tensor-parallel", []string{"max_rel_diff_block", "bytes_per_layer", "model_bytes_per_layer"},
			func(v []float64) string {
				return fmt.Sprintf("tensor parallel: block within %.2g of one process's, %s a layer against the model's %s",
					v[0], reports.FormatBytes(v[1]), reports.FormatBytes(v[2]))
			}},
	}},
	{name: "an inference scheduling experiment", labs: []string{"serving", "serving-engine"}, evidence: []evidence{
		{"serving", []string{"continuous_peak_goodput_per_s", "fixed_peak_goodput_per_s", "goodput_peak_ratio_continuous_vs_fixed"},
			func(v []float64) string {
				return fmt.Sprintf("continuous batching's peak goodput %.2f req/s against fixed's %.2f (%.1fx)", v[0], v[1], v[2])
			}},
		{"serving", []string{"kv_waste_paged_ratio", "kv_waste_contiguous_ratio"},
			func(v []float64) string {
				return fmt.Sprintf("KV memory wasted: paged %.1f%%, contiguous %.1f%%", 100*v[0], 100*v[1])
			}},
		{"serving-engine", []string{"decode_tokens_per_s_b1", "decode_tokens_per_s_b32", "prefill_tokens_per_s"},
			func(v []float64) string {
				return fmt.Sprintf("the paged-KV engine on the GPT: decode %.0f tokens/s at batch 1, %.0f at 32; prefill %.0f tokens/s", v[0], v[1], v[2])
			}},
		{"serving-engine", []string{"goodput_ratio_continuous_vs_fixed"},
			func(v []float64) string {
				return fmt.Sprintf("engine: continuous %.2fx fixed's goodput at fixed's peak rate", v[0])
			}},
	}},
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fastPath says how many of the bf16 step's product shapes the
// calibration put on a 16-bit hardware path (VDPBF16PS or AMX) because
// it timed them faster than float32 FMA.
func fastPath(hw, shapes int) string {
	switch {
	case shapes == 0:
		return "no product shape calibrated (no bf16 hardware path, or one forced)"
	case hw == 0:
		return fmt.Sprintf("none of %d product shapes faster on VDPBF16PS/AMX here, so the saving is memory", shapes)
	}
	return fmt.Sprintf("%d of %d product shapes on VDPBF16PS/AMX, where calibration timed them faster", hw, shapes)
}

// artifactRow is one row as the gate prints it.
type artifactRow struct {
	name, verdict, command string
	figures                []string
	missing                []string // "lab: metric" named by the row but not in the lab's report
}

// artifactRows fills the table from the labs' reports (by lab name) and
// the names of the labs not built; failed names the labs that did not run.
func artifactRows(ran map[string]*reports.Report, failed map[string]bool, quick bool, seed int64) []artifactRow {
	var rows []artifactRow
	for _, a := range artifacts {
		isBuilt := func(l string) bool { return ran[l] != nil || failed[l] }
		row := artifactRow{name: a.name, command: artifactCommand(a.labs, isBuilt, quick, seed)}
		built, fail, unsure := 0, false, false
		var notBuilt []string
		for _, name := range a.labs {
			r := ran[name]
			switch {
			case !failed[name] && r == nil:
				notBuilt = append(notBuilt, name)
			case failed[name]:
				built++
				fail = true
			case r != nil:
				built++
				switch r.Outcome() {
				case reports.Fail:
					fail = true
				case reports.Inconclusive:
					unsure = true
				}
			}
		}
		switch {
		case built == 0:
			row.verdict = "NOT BUILT"
		case fail:
			row.verdict = "FAIL"
		case unsure:
			row.verdict = "INCONCLUSIVE"
		default:
			row.verdict = "PASS"
		}
		for _, e := range a.evidence {
			r := ran[e.lab]
			if r == nil {
				continue
			}
			v := make([]float64, len(e.metrics))
			lack := ""
			for i, m := range e.metrics {
				var ok bool
				if v[i], ok = r.Metrics.Float(m); ok {
					continue
				}
				if r.Metrics.Has(m) {
					lack = fmt.Sprintf("(%s: %s not measured in this run; its notes say why)", e.lab, m)
				} else {
					row.missing = append(row.missing, e.lab+": "+m)
					lack = fmt.Sprintf("(%s reports no %s)", e.lab, m)
				}
				break
			}
			if lack != "" {
				row.figures = append(row.figures, lack)
			} else {
				row.figures = append(row.figures, e.show(v))
			}
		}
		if built > 0 && len(notBuilt) > 0 {
			row.figures = append(row.figures, "lab "+strings.Join(notBuilt, ", ")+": NOT BUILT")
		}
		rows = append(rows, row)
	}
	return rows
}

// artifactCommand is the command that reproduces an artifact alone: its
// built labs run one after the other, with the gate's --quick and --seed.
func artifactCommand(labs []string, built func(string) bool, quick bool, seed int64) string {
	var parts []string
	for _, l := range labs {
		if !built(l) {
			continue
		}
		c := "gptlab run " + l
		if quick {
			c += " --quick"
		}
		if seed != 1 {
			c += fmt.Sprintf(" --seed %d", seed)
		}
		parts = append(parts, c)
	}
	return strings.Join(parts, " && ")
}

// addArtifactTable puts the artifact table first among the gate's tables:
// a row a figure, the artifact and its verdict on its first, the command
// that reproduces it on its last.
func addArtifactTable(gate *reports.Report, rows []artifactRow) {
	t := gate.AddTable("The chapter's five artifacts: the labs' own checks give each verdict",
		reports.Text("artifact"), reports.Text("verdict"), reports.Text("what makes the case, and how to rerun it alone"))
	for _, row := range rows {
		lines := append(slices.Clone(row.figures), "reproduce: "+row.command)
		if row.command == "" {
			lines = []string{"no lab of it is built yet"}
		}
		for i, line := range lines {
			name, verdict := "", ""
			if i == 0 {
				name, verdict = row.name, row.verdict
			}
			t.Row(name, verdict, line)
		}
	}
	gate.Tables = append([]*reports.Table{t}, gate.Tables[:len(gate.Tables)-1]...)
}
