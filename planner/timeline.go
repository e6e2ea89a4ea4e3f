package planner

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Timeline draws a plan as the chapter's widget does: time on x, arena
// offset on y, one rectangle per buffer spanning its lifetime [Start, End)
// and its bytes [offset, offset+size), labelled with its ID; a solid line
// marks the plan's peak and a dashed one the lower bound. yMax fixes the
// top of the y axis (0: the peak), so two timelines can share a scale.
// Sizes are shown in the unit that suits yMax (B, KiB or MiB).
func Timeline(title string, p Problem, pl Plan, yMax int64) (*plot.Plot, error) {
	if err := checkShape(p, pl); err != nil {
		return nil, err
	}
	if yMax <= 0 {
		yMax = pl.Peak
	}
	unit, scale := byteUnit(yMax)
	plt := plot.New()
	plt.Title.Text = title
	plt.X.Label.Text = "step"
	plt.Y.Label.Text = "arena offset (" + unit + ")"
	rs := &rectangles{label: plt.X.Tick.Label}
	var tEnd int64
	for i, b := range p.Buffers {
		rs.rs = append(rs.rs, rectangle{
			x0: float64(b.Start), x1: float64(b.End),
			y0: float64(pl.Offsets[i]) / scale, y1: float64(pl.Offsets[i]+b.Size) / scale,
			id: b.ID, fill: palette[i%len(palette)],
		})
		tEnd = max(tEnd, b.End)
	}
	plt.Add(rs)
	for _, l := range []struct {
		name  string
		y     int64
		dash  bool
		color color.Color
	}{{"peak " + FormatBytes(pl.Peak), pl.Peak, false, color.Black}, {"lower bound " + FormatBytes(p.Bound()), p.Bound(), true, color.RGBA{R: 200, A: 255}}} {
		line, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(l.y) / scale}, {X: float64(tEnd), Y: float64(l.y) / scale}})
		if err != nil {
			return nil, err
		}
		line.Color, line.Width = l.color, vg.Points(1.5)
		if l.dash {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		plt.Add(line)
		plt.Legend.Add(l.name, line)
	}
	plt.Legend.Top = true
	plt.X.Min, plt.X.Max = 0, float64(tEnd)
	plt.Y.Min, plt.Y.Max = 0, float64(yMax)/scale*1.15 // room for the legend
	return plt, nil
}

// byteUnit picks a unit for sizes up to n.
func byteUnit(n int64) (string, float64) {
	switch {
	case n >= 16<<20:
		return "MiB", 1 << 20
	case n >= 16<<10:
		return "KiB", 1 << 10
	}
	return "B", 1
}

// FormatBytes writes n bytes for a person: whole numbers of the largest
// binary unit that divides n evenly enough ("192 MiB", "1536 B"), else four
// significant digits ("1.311 MiB").
func FormatBytes(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
		if n >= 16*u.size {
			return fmt.Sprintf("%.4g %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// palette is a set of light fills that keep black labels readable.
var palette = []color.Color{
	color.RGBA{166, 206, 227, 255}, color.RGBA{178, 223, 138, 255}, color.RGBA{251, 154, 153, 255},
	color.RGBA{253, 191, 111, 255}, color.RGBA{202, 178, 214, 255}, color.RGBA{255, 255, 153, 255},
	color.RGBA{141, 211, 199, 255}, color.RGBA{217, 217, 217, 255},
}

type rectangle struct {
	x0, x1, y0, y1 float64
	id             string
	fill           color.Color
}

// rectangles is a plot.Plotter drawing filled, outlined, labelled boxes.
type rectangles struct {
	rs    []rectangle
	label draw.TextStyle
}

// Plot implements plot.Plotter.
func (r *rectangles) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	edge := draw.LineStyle{Color: color.Black, Width: vg.Points(0.7)}
	text := r.label
	text.XAlign, text.YAlign = draw.XCenter, draw.YCenter
	for _, b := range r.rs {
		x0, x1, y0, y1 := trX(b.x0), trX(b.x1), trY(b.y0), trY(b.y1)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}
		c.FillPolygon(b.fill, c.ClipPolygonXY(pts))
		c.StrokeLines(edge, c.ClipLinesXY(append(pts, pts[0]))...)
		small := text // thin boxes get a smaller label rather than none
		small.Font.Size = text.Font.Size * 0.7
		for _, sty := range []draw.TextStyle{text, small} {
			if y1-y0 >= sty.Font.Size && x1-x0 >= sty.Width(b.id) {
				c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, b.id)
				break
			}
		}
	}
}

// DataRange implements plot.DataRanger.
func (r *rectangles) DataRange() (xmin, xmax, ymin, ymax float64) {
	for k, b := range r.rs {
		if k == 0 {
			xmin, xmax, ymin, ymax = b.x0, b.x1, b.y0, b.y1
		}
		xmin, xmax = min(xmin, b.x0), max(xmax, b.x1)
		ymin, ymax = min(ymin, b.y0), max(ymax, b.y1)
	}
	return xmin, xmax, ymin, ymax
}
