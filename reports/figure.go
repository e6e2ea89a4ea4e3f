package reports

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

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

// AttachFile attaches a figure already drawn, as the bytes of its file
// (name with its extension): a report read back from another process's
// JSON gets its figures this way. WriteFigures writes it as it is.
func (r *Report) AttachFile(name string, data []byte) {
	if r.files == nil {
		r.files = map[string][]byte{}
	}
	r.files[name] = data
}

// FigureList returns the figures attached to the report.
func (r *Report) FigureList() []Figure { return r.figures }

// FigureFiles are the names of the files WriteFigures writes, in order.
func (r *Report) FigureFiles() []string {
	var out []string
	for name := range r.files {
		out = append(out, name)
	}
	slices.Sort(out)
	for _, f := range r.figures {
		out = append(out, f.Name+".svg", f.Name+".png")
	}
	return out
}

// WriteFigures draws every figure into dir as SVG and PNG, atomically.
func (r *Report) WriteFigures(dir string) error {
	for name, data := range r.files {
		if err := WriteFileAtomic(filepath.Join(dir, name), bytesWriter(data)); err != nil {
			return fmt.Errorf("figure %s: %w", name, err)
		}
	}
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

// bytesWriter writes a byte slice (io.WriterTo for WriteFileAtomic).
type bytesWriter []byte

func (b bytesWriter) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}
