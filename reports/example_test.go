package reports_test

import (
	"os"

	"gptlab/reports"
)

func ExampleReport_WriteText() {
	r := reports.New("reuse", "Aligned interval reuse")
	r.Metric("planned_peak_bytes", 1536)
	t := r.AddTable("Arena", "planner", "peak bytes")
	t.Row("independent", 2304)
	t.Row("best-fit", 1536)
	r.Check("plan verified", true, "no overlap")
	r.WriteText(os.Stdout)
	// Output:
	// reuse — Aligned interval reuse
	//
	// Arena
	// ┌─────────────┬────────────┐
	// │   planner   │ peak bytes │
	// ├─────────────┼────────────┤
	// │ independent │       2304 │
	// │ best-fit    │       1536 │
	// └─────────────┴────────────┘
	//
	// Metrics
	// ┌────────────────────┬───────┐
	// │       metric       │ value │
	// ├────────────────────┼───────┤
	// │ planned_peak_bytes │  1536 │
	// └────────────────────┴───────┘
	//
	// Checks
	// ┌───────────────┬────────┬────────────┐
	// │     check     │ result │   detail   │
	// ├───────────────┼────────┼────────────┤
	// │ plan verified │ PASS   │ no overlap │
	// └───────────────┴────────┴────────────┘
	//
	// all 1 checks passed
}
