package planner

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func TestTimeline(t *testing.T) {
	p := mustProgram(t, Branched(false), 64)
	naive := mustRun(t, "independent", p)
	planned := mustRun(t, "best-fit", p)
	for _, c := range []struct {
		name string
		pl   Plan
	}{{"naive", naive}, {"planned", planned}} {
		plt, err := Timeline(c.name, p, c.pl, naive.Peak)
		if err != nil {
			t.Fatal(err)
		}
		svg := vgsvg.New(6*vg.Inch, 4*vg.Inch)
		plt.Draw(draw.New(svg))
		var out bytes.Buffer
		if _, err := svg.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		// Every buffer's label is drawn, as is the legend.
		for _, want := range []string{">x<", ">h<", ">y<", "lower bound"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s timeline lacks %q", c.name, want)
			}
		}
		if dir := os.Getenv("TIMELINE_PNG_DIR"); dir != "" { // for a person to look at
			png := vgimg.PngCanvas{Canvas: vgimg.New(6*vg.Inch, 4*vg.Inch)}
			plt.Draw(draw.New(png))
			f, _ := os.Create(dir + "/" + c.name + ".png")
			png.WriteTo(f)
			f.Close()
		}
	}
	if _, err := Timeline("bad", p, Plan{}, 0); err == nil {
		t.Error("Timeline with no offsets: no error")
	}
}

func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1536, "1536 B"}, {2048, "2 KiB"}, {192 << 20, "192 MiB"}, {1374208, "1342 KiB"}, {1374209, "1342 KiB"}, {20<<20 + 1, "20 MiB"}, {1000, "1000 B"}, {5 << 30, "5 GiB"}}
	for _, tc := range tests {
		if got := FormatBytes(tc.n); got != tc.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
