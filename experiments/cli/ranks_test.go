package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/parallel"
	"gptlab/reports"
)

type ranksConfig struct {
	Ranks int    `set:"ranks" help:"processes"`
	Tag   string `set:"tag" help:"a setting that must reach every rank"`
}

func init() {
	labs = append(labs, lab.New("test-ranks", "a multi-process lab used by the tests", ranksConfig{Ranks: 2, Tag: "x,y"}, nil,
		func(ctx context.Context, cfg *ranksConfig, opt lab.Options) (*reports.Report, error) {
			return lab.OnRanks(ctx, "test-ranks", cfg, opt, cfg.Ranks, "auto", func(ctx context.Context, c *parallel.Comm) (*reports.Report, error) {
				buf := []float32{float32(c.Rank() + 1)}
				if err := c.AllReduce(buf); err != nil {
					return nil, err
				}
				n := float32(c.Size())
				r := reports.New("test-ranks", "ranks")
				r.Check("the all-reduce sums every rank", buf[0] == n*(n+1)/2 && c.Size() == cfg.Ranks, "sum %v over %d ranks", buf[0], c.Size())
				t := r.AddTable("settings on this rank", reports.Text("key"), reports.Text("value"))
				t.Row("tag", cfg.Tag)
				r.Metric("rank", c.Rank())
				r.AddFigure("probe", plot.New(), 4*vg.Centimeter, 3*vg.Centimeter)
				return r, nil
			})
		}))
}

// TestLabLaunchesItsRanks: a multi-process lab run on its own launches a
// job of itself, gets the settings to every rank and returns rank 0's
// report with its figures.
func TestLabLaunchesItsRanks(t *testing.T) {
	l, err := Find("test-ranks")
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Defaults().(*ranksConfig)
	cfg.Ranks, cfg.Tag = 3, "p,q"
	r, err := l.Run(context.Background(), cfg, lab.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	labtest.ChecksHold(t, r, "")
	if got := r.Tables[0].Rows[0][1]; got != "p,q" {
		t.Errorf("rank 0 ran with tag %v, want p,q: the settings did not reach it", got)
	}
	if v, _ := r.Metrics.Get("rank"); v != 0.0 {
		t.Errorf("the report is rank %v's, want rank 0's", v)
	}
	dir := t.TempDir()
	if err := r.WriteFigures(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"probe.svg", "probe.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("figure %s: %v", f, err)
		}
	}
}
