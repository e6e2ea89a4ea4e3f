package reports_test

import (
	"fmt"
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

func ExampleReport_TimedCheck() {
	r := reports.New("checkpoint", "timed")
	// The median of 23 rounds' step-time ratio and its 95% interval.
	tm := reports.Timing{Target: 1.1, Median: 1.06, Low: 1.02, High: 1.13, Level: 0.95, Rounds: 23, Spread: 0.4, Unit: "x"}
	fmt.Println(r.TimedCheck("long: selective at most 1.1x the step time", tm, "step time over none's"))
	fmt.Println(r.Failed(), r.Outcome())
	fmt.Println(r.Checks[0].Detail)
	// Output:
	// inconclusive
	// false inconclusive
	// step time over none's; median 1.060x, 95% interval 1.020x to 1.130x over 23 rounds (spread 40%), target at most 1.100x
}

func ExampleReadReport() {
	r, err := reports.ReadReport([]byte(`{"lab": "reuse", "title": "saved", "checks": [{"name": "held", "pass": true, "verdict": "pass"}]}`))
	fmt.Println(r.Lab, r.Outcome(), err)
	_, err = reports.ReadReport([]byte(`{"lab": "reuse", "checks": [{"name": "held", "pass": true, "verdict": "fail"}]}`))
	fmt.Println(err)
	// Output:
	// reuse pass <nil>
	// reuse: check "held": pass true with verdict fail
}
