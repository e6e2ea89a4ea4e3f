package reports

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Figure is a plot a report carries; it is written as NAME.svg and NAME.png
// under --out.
type Figure struct {
	Name          string // file name without extension
	Plot          *plot.Plot
	Width, Height vg.Length
}

// AddFigure attaches a plot to the report under name (no extension).
func (r *Report) AddFigure(name string, p *plot.Plot, width, height vg.Length) {
	r.figures = append(r.figures, Figure{Name: name, Plot: p, Width: width, Height: height})
	r.Figures = append(r.Figures, name+".svg", name+".png")
}

// FigureList returns the figures attached to the report.
func (r *Report) FigureList() []Figure { return r.figures }

// WriteFigures draws every figure into dir as SVG and PNG, atomically.
func (r *Report) WriteFigures(dir string) error {
	for _, f := range r.figures {
		svg := vgsvg.New(f.Width, f.Height)
		f.Plot.Draw(draw.New(svg))
		if err := WriteFileAtomic(filepath.Join(dir, f.Name+".svg"), svg); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
		png := vgimg.PngCanvas{Canvas: vgimg.New(f.Width, f.Height)}
		f.Plot.Draw(draw.New(png))
		if err := WriteFileAtomic(filepath.Join(dir, f.Name+".png"), png); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
	}
	return nil
}
