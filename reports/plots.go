package reports

import (
	"image/color"
	"math"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// This file holds what makes a figure readable at a glance: point labels
// that never sit on one another or on a point (Labels), and small
// multiples, one panel per series group on shared axes (AddPanels).

// Labels returns a plotter naming points: labels of points closer than a
// few points on the canvas merge into one ("every:1 = sqrt"), and each is
// put at the first place beside its point (right, left, above, below, then
// the corners, then further out) where it overlaps no other label, no
// point of avoid or of its own, and stays inside the plot. A label with no
// such place is left out and counted in Dropped.
func Labels(xys plotter.XYs, labels []string, avoid plotter.XYs, size vg.Length) *PointLabels {
	sty := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
	return &PointLabels{XYs: xys, Labels: labels, Avoid: avoid, TextStyle: sty}
}

// PointLabels is the plotter Labels returns.
type PointLabels struct {
	XYs       plotter.XYs
	Labels    []string
	Avoid     plotter.XYs
	TextStyle text.Style
	// Dropped counts the labels no place was found for at the last draw.
	Dropped int
}

// placeRadius is how close (in canvas points) two points are to share a label.
const placeRadius = vg.Length(4)

// Plot implements plot.Plotter.
func (l *PointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := l.TextStyle
	type group struct {
		at    vg.Point
		names []string
	}
	var groups []group
	for i, xy := range l.XYs {
		pt := vg.Point{X: trX(xy.X), Y: trY(xy.Y)}
		joined := false
		for g := range groups {
			if d := groups[g].at.Sub(pt); math.Hypot(float64(d.X), float64(d.Y)) < float64(placeRadius) {
				groups[g].names = append(groups[g].names, l.Labels[i])
				joined = true
				break
			}
		}
		if !joined {
			groups = append(groups, group{at: pt, names: []string{l.Labels[i]}})
		}
	}
	var taken []vg.Rectangle
	dot := func(xy plotter.XY) vg.Rectangle {
		pt := vg.Point{X: trX(xy.X), Y: trY(xy.Y)}
		r := vg.Length(3)
		return vg.Rectangle{Min: vg.Point{X: pt.X - r, Y: pt.Y - r}, Max: vg.Point{X: pt.X + r, Y: pt.Y + r}}
	}
	for _, xy := range append(append(plotter.XYs(nil), l.XYs...), l.Avoid...) {
		taken = append(taken, dot(xy))
	}
	l.Dropped = 0
	for _, g := range groups {
		txt := strings.Join(g.names, " = ")
		// The box reserved is at least half an em a character wide and
		// a point larger all round than the font's own measure: a reader
		// (and the figures' overlap test, which estimates boxes from the
		// SVG's text) sees labels apart, not touching.
		w := max(sty.Width(txt), sty.Font.Size*vg.Length(0.55*float64(utf8.RuneCountInString(txt)))) + 2
		h := sty.Height(txt) + 2
		gap := vg.Length(4)
		var placed bool
		for _, far := range []vg.Length{1, 2.5, 4.5} {
			for _, off := range []vg.Point{
				{X: gap * far, Y: -h / 2}, {X: -gap*far - w, Y: -h / 2}, {X: -w / 2, Y: gap * far}, {X: -w / 2, Y: -gap*far - h},
				{X: gap * far, Y: gap * far}, {X: -gap*far - w, Y: gap * far}, {X: gap * far, Y: -gap*far - h}, {X: -gap*far - w, Y: -gap*far - h},
			} {
				box := vg.Rectangle{Min: g.at.Add(off), Max: g.at.Add(off).Add(vg.Point{X: w, Y: h})}
				if !inside(box, c.Rectangle) || overlapsAny(box, taken) {
					continue
				}
				taken = append(taken, box)
				c.FillText(sty, box.Min.Add(vg.Point{X: 1, Y: 1}), txt)
				placed = true
				break
			}
			if placed {
				break
			}
		}
		if !placed {
			l.Dropped++
		}
	}
}

func inside(r, outer vg.Rectangle) bool {
	return r.Min.X >= outer.Min.X && r.Min.Y >= outer.Min.Y && r.Max.X <= outer.Max.X && r.Max.Y <= outer.Max.Y
}

func overlapsAny(r vg.Rectangle, rs []vg.Rectangle) bool {
	for _, o := range rs {
		if r.Min.X < o.Max.X && o.Min.X < r.Max.X && r.Min.Y < o.Max.Y && o.Min.Y < r.Max.Y {
			return true
		}
	}
	return false
}

// AddPanels attaches small multiples: the plots side by side in cols
// columns, every panel on the same X and Y range (the union of theirs), so
// their data compare at a glance (6% wider each way, for labels at the
// edges). Each panel keeps its own title and
// legend; name is the file name as for AddFigure.
func (r *Report) AddPanels(name string, panels []*plot.Plot, cols int, width, height vg.Length) {
	if len(panels) == 0 {
		return
	}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, p := range panels {
		xmin, xmax = math.Min(xmin, p.X.Min), math.Max(xmax, p.X.Max)
		ymin, ymax = math.Min(ymin, p.Y.Min), math.Max(ymax, p.Y.Max)
	}
	dx, dy := 0.06*(xmax-xmin), 0.06*(ymax-ymin) // room for labels at the edges
	for _, p := range panels {
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin-dx, xmax+dx, ymin-dy, ymax+dy
	}
	cols = max(1, min(cols, len(panels)))
	r.figures = append(r.figures, Figure{Name: name, Panels: panels, Cols: cols, Width: width, Height: height})
	r.Figures = append(r.Figures, name+".svg", name+".png")
}

// drawPanels tiles the panels on c.
func (f Figure) drawPanels(c draw.Canvas) {
	rows := (len(f.Panels) + f.Cols - 1) / f.Cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, f.Cols)
		for j := range grid[i] {
			if k := i*f.Cols + j; k < len(f.Panels) {
				grid[i][j] = f.Panels[k]
			}
		}
	}
	tiles := draw.Tiles{Rows: rows, Cols: f.Cols, PadX: vg.Millimeter * 3, PadY: vg.Millimeter * 3,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, c)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				Figure{Plot: p}.Draw(canvases[i][j])
			}
		}
	}
}
