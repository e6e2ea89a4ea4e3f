package cli

import (
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// textBox is where a figure's text sits, in the SVG's points (y down).
type textBox struct {
	text                   string
	minX, minY, maxX, maxY float64
}

var (
	svgHeight  = regexp.MustCompile(`viewBox="0 0 [0-9.]+ ([0-9.]+)"`)
	svgRotated = regexp.MustCompile(`(?s)<g transform="rotate\([^)]*\)">.*?</g>`)
	svgText    = regexp.MustCompile(`<text x="([-0-9.e]+)" y="([-0-9.e]+)"[^>]*font-size:([0-9.]+)px[^>]*>([^<]*)</text>`)
)

// textBoxes reads the unrotated texts of an SVG written by gonum/plot's
// vgsvg (texts at a baseline, y flipped under the page's transform); a
// text's width is estimated at half an em a character (Liberation
// Serif's average is under that), its height an em.
func textBoxes(svg string) []textBox {
	m := svgHeight.FindStringSubmatch(svg)
	if m == nil {
		return nil
	}
	h, _ := strconv.ParseFloat(m[1], 64)
	var out []textBox
	// The rotated groups hold the y-axis labels alone: drop the texts in them.
	plain := svgRotated.ReplaceAllString(svg, "")
	for _, t := range svgText.FindAllStringSubmatch(plain, -1) {
		x, _ := strconv.ParseFloat(t[1], 64)
		y, _ := strconv.ParseFloat(t[2], 64)
		size, _ := strconv.ParseFloat(t[3], 64)
		s := html.UnescapeString(t[4])
		if strings.TrimSpace(s) == "" {
			continue
		}
		base := h + y
		w := 0.5 * size * float64(utf8.RuneCountInString(s))
		out = append(out, textBox{text: s, minX: x, maxX: x + w, minY: base - 0.72*size, maxY: base + 0.2*size})
	}
	return out
}

// overlap is how far two boxes intersect, in points, on the narrower axis.
func overlap(a, b textBox) float64 {
	dx := min(a.maxX, b.maxX) - max(a.minX, b.minX)
	dy := min(a.maxY, b.maxY) - max(a.minY, b.minY)
	return min(dx, dy)
}

// TestTextBoxesOverlap: the measure itself, on two labels one over the
// other (a negative control) and two apart.
func TestTextBoxesOverlap(t *testing.T) {
	svg := `<svg viewBox="0 0 100 100"><g transform="scale(1, -1) translate(0, -100)">` +
		`<text x="10" y="-50" transform="scale(1, -1)" style="font-size:10px">tiny selective</text>` +
		`<text x="12" y="-52" transform="scale(1, -1)" style="font-size:10px">tiny every:2</text>` +
		`<text x="10" y="-20" transform="scale(1, -1)" style="font-size:10px">apart</text></g></svg>`
	b := textBoxes(svg)
	if len(b) != 3 || overlap(b[0], b[1]) <= 1 || overlap(b[0], b[2]) > 0 {
		t.Fatalf("boxes %+v: want the first two overlapping, the third apart", b)
	}
}

// figuresNoOverlappingText: in every figure of every lab's --quick
// report, no text box covers another by more than a point (titles, ticks,
// axis labels, legends and point labels alike).
func figuresNoOverlappingText(t *testing.T, dir string) {
	svgs, _ := filepath.Glob(filepath.Join(dir, "*", "*.svg"))
	if len(svgs) == 0 {
		t.Fatal("no figures written")
	}
	for _, path := range svgs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		boxes := textBoxes(string(data))
		if len(boxes) == 0 {
			t.Errorf("%s: no text read", path)
		}
		for i := range boxes {
			for j := i + 1; j < len(boxes); j++ {
				if d := overlap(boxes[i], boxes[j]); d > 1 {
					rel, _ := filepath.Rel(dir, path)
					t.Errorf("%s: %q over %q by %.1f pt", rel, boxes[i].text, boxes[j].text, d)
				}
			}
		}
	}
}
