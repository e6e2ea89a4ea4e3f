package checkpoint

import (
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"gptlab/reports"
)

// paretoFigure is planned peak against step time, one panel per shape on
// shared axes (small multiples): the budget sweep's schedules as a line
// (the front the dynamic program traces), the fixed policies as labelled
// points, each time relative to that shape's none.
type paretoFigure struct {
	panels []*plot.Plot
}

func newParetoFigure() *paretoFigure { return &paretoFigure{} }

var paretoColors = []color.Color{
	color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
}

// add draws one shape's panel.
func (f *paretoFigure) add(name string, res *ckShapeResult) {
	p := plot.New()
	p.Title.Text = name
	p.X.Label.Text = "planned peak (x none's)"
	p.Y.Label.Text = "step time (x none's)"
	p.Add(plotter.NewGrid())
	none := res.rows[0]
	var sweep plotter.XYs
	for _, row := range res.sweep {
		sweep = append(sweep, plotter.XY{X: float64(row.peak) / float64(none.peak), Y: row.slow})
	}
	if l, pts, err := plotter.NewLinePoints(sweep); err == nil {
		l.Color, pts.Color = paretoColors[0], paretoColors[0]
		p.Add(l, pts)
		p.Legend.Add("budget sweep", l)
	}
	var fixed plotter.XYs
	var labels []string
	for _, row := range res.rows {
		fixed = append(fixed, plotter.XY{X: float64(row.peak) / float64(none.peak), Y: row.slow})
		labels = append(labels, row.name)
	}
	if s, err := plotter.NewScatter(fixed); err == nil {
		s.Color, s.Shape = paretoColors[1], draw.TriangleGlyph{}
		p.Add(s)
		p.Legend.Add("fixed policy", s)
	}
	p.Add(reports.Labels(fixed, labels, sweep, vg.Points(7)))
	f.panels = append(f.panels, p)
}

func (f *paretoFigure) attach(r *reports.Report) {
	cols := min(3, len(f.panels))
	rows := (len(f.panels) + cols - 1) / max(cols, 1)
	for _, p := range f.panels {
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	r.AddPanels("checkpoint-pareto", f.panels, cols, vg.Length(cols)*12*vg.Centimeter, vg.Length(rows)*8*vg.Centimeter)
}
