package reports_test

import (
	"os"
	"time"

	"gptlab/reports"
)

func ExampleReport_WriteText() {
	r := reports.New("reuse", "Aligned interval reuse")
	r.Metric("planned_peak_bytes", 1536)
	t := r.AddTable("Arena", reports.Text("planner"), reports.Bytes("peak"), reports.Ratio("peak/bound"),
		reports.Duration("plan", time.Millisecond, 3), reports.Text("verified"))
	t.Row("independent", 2304, 1.5, 52*time.Microsecond, "sweep + simulation")
	t.Row("best-fit", 1536, 1.0, 75*time.Microsecond, "sweep + simulation")
	r.Check("plan verified", true, "no overlap")
	r.Check("peak at least the bound", true, "1536 >= 1536")
	r.WriteText(os.Stdout)
	// Output:
	// reuse — Aligned interval reuse
	//
	// Arena
	// In every row: verified = sweep + simulation
	// ┌─────────────┬──────────┬────────────┬───────────┐
	// │   planner   │   peak   │ peak/bound │ plan (ms) │
	// ├─────────────┼──────────┼────────────┼───────────┤
	// │ independent │ 2.25 KiB │      1.500 │     0.052 │
	// │ best-fit    │  1.5 KiB │      1.000 │     0.075 │
	// └─────────────┴──────────┴────────────┴───────────┘
	//
	// Metrics
	// ┌────────────────────┬────────────────┐
	// │       metric       │     value      │
	// ├────────────────────┼────────────────┤
	// │ planned_peak_bytes │ 1.5 KiB (1536) │
	// └────────────────────┴────────────────┘
	//
	// Checks
	// In every row: result = PASS
	// ┌─────────────────────────┬──────────────┐
	// │          check          │    detail    │
	// ├─────────────────────────┼──────────────┤
	// │ plan verified           │ no overlap   │
	// │ peak at least the bound │ 1536 >= 1536 │
	// └─────────────────────────┴──────────────┘
	//
	// all 2 checks passed
}
