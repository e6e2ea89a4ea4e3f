package reports

import (
	"fmt"
	"image/color"
	"io"
	"math"
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
	Name string // file name without extension
	Plot *plot.Plot
	// Panels, instead of Plot, are small multiples tiled in Cols columns
	// (AddPanels).
	Panels        []*plot.Plot
	Cols          int
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
		f.Draw(draw.New(svg))
		if err := WriteFileAtomic(filepath.Join(dir, f.Name+".svg"), svg); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
		// Sharp on a laptop screen: at least PNGWidth pixels wide.
		dpi := max(96, math.Ceil(PNGWidth/float64(f.Width/vg.Inch)))
		png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(f.Width, f.Height), vgimg.UseDPI(int(dpi)),
			vgimg.UseBackgroundColor(color.White))}
		f.Draw(draw.New(png))
		if err := WriteFileAtomic(filepath.Join(dir, f.Name+".png"), png); err != nil {
			return fmt.Errorf("figure %s: %w", f.Name, err)
		}
	}
	return nil
}

// PNGWidth is the fewest pixels across a figure's PNG.
const PNGWidth = 1200

// Draw draws the figure on c with its legend, if it has one, outside the
// plotted area: in a column of its own at the right, top-aligned below the
// title, so no entry covers the data. Drawing leaves the plot as it was.
func (f Figure) Draw(c draw.Canvas) {
	if len(f.Panels) > 0 {
		f.drawPanels(c)
		return
	}
	p := f.Plot
	legend := p.Legend
	box := legend.Rectangle(c)
	if box.Size().Y <= 0 { // no entries
		p.Draw(c)
		return
	}
	pad := vg.Points(6)
	w := box.Size().X + 2*pad
	p.Legend = plot.NewLegend()
	defer func() { p.Legend = legend }()
	p.Draw(draw.Crop(c, 0, -w, 0, 0))
	strip := draw.Crop(c, c.Size().X-w+pad, -pad, 0, -(p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding + pad))
	legend.Left, legend.Top, legend.XOffs, legend.YOffs = true, true, 0, 0
	legend.Draw(strip)
}

// bytesWriter writes a byte slice (io.WriterTo for WriteFileAtomic).
type bytesWriter []byte

func (b bytesWriter) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b)
	return int64(n), err
}
