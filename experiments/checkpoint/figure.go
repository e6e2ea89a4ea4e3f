package checkpoint

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"gptlab/reports"
)

// paretoFigure is planned peak against step time, per shape: the budget
// sweep's schedules as a line (the front the dynamic program traces), the
// fixed policies as points, each time relative to that shape's none.
type paretoFigure struct {
	p     *plot.Plot
	shape int
}

func newParetoFigure() *paretoFigure {
	p := plot.New()
	p.Title.Text = "Checkpointing: planned peak against step time"
	p.X.Label.Text = "planned peak of the step / none's"
	p.Y.Label.Text = "step time / none's"
	p.Add(plotter.NewGrid())
	return &paretoFigure{p: p}
}

var paretoColors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
	color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
	color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
}

// add draws one shape.
func (f *paretoFigure) add(name string, res *ckShapeResult) {
	c := paretoColors[f.shape%len(paretoColors)]
	f.shape++
	none := res.rows[0]
	var sweep plotter.XYs
	for _, row := range res.sweep {
		sweep = append(sweep, plotter.XY{X: float64(row.peak) / float64(none.peak), Y: row.slow})
	}
	if l, pts, err := plotter.NewLinePoints(sweep); err == nil {
		l.Color, pts.Color = c, c
		f.p.Add(l, pts)
		f.p.Legend.Add(name+": budget sweep", l)
	}
	var fixed plotter.XYs
	var labels []string
	for _, row := range res.rows {
		fixed = append(fixed, plotter.XY{X: float64(row.peak) / float64(none.peak), Y: row.slow})
		labels = append(labels, fmt.Sprintf("%s %s", name, row.name))
	}
	if s, err := plotter.NewScatter(fixed); err == nil {
		s.Color, s.Shape = c, draw.TriangleGlyph{}
		f.p.Add(s)
		f.p.Legend.Add(name+": fixed policies", s)
	}
	if l, err := plotter.NewLabels(plotter.XYLabels{XYs: fixed, Labels: labels}); err == nil {
		for i := range l.TextStyle {
			l.TextStyle[i].Font.Size = vg.Points(7)
		}
		f.p.Add(l)
	}
}

func (f *paretoFigure) attach(r *reports.Report) {
	f.p.Legend.Top = true
	r.AddFigure("checkpoint-pareto", f.p, 18*vg.Centimeter, 12*vg.Centimeter)
}
