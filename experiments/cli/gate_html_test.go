package cli

import (
	"context"
	"html"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gptlab/reports"
)

// gateOutDir writes the quick gate as exit-gate --out does: each lab's
// report under DIR/LAB, then the summary (report.html among its files).
// GPTLAB_HTML_OUT names a directory to keep it in; else a temporary one.
func gateOutDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GPTLAB_HTML_OUT")
	if dir == "" {
		dir = t.TempDir()
	}
	gate := quickGateReport(t)
	for _, r := range gate.Reports {
		if err := writeReportDir(r, filepath.Join(dir, r.Lab)); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeReportDir(gate, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGateHTMLOut writes the quick gate's --out once and checks it:
// report.html self-contained, as Chromium renders it, and the figures'
// text apart.
func TestGateHTMLOut(t *testing.T) {
	dir := gateOutDir(t)
	t.Run("self-contained", func(t *testing.T) { gateHTMLSelfContained(t, dir) })
	t.Run("chromium", func(t *testing.T) { gateHTMLInChromium(t, dir) })
	t.Run("figures", func(t *testing.T) { figuresNoOverlappingText(t, dir) })
}

// gateHTMLSelfContained: report.html fetches nothing and runs
// nothing: no script, no external address, every figure inline, a
// section per artifact and every lab's checks.
func gateHTMLSelfContained(t *testing.T, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	for _, bad := range []string{"<script", "http://", "https://", "@import", "url(", "<link"} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html holds %q: it must need nothing from outside", bad)
		}
	}
	gate := quickGateReport(t)
	figures := 0
	for _, r := range gate.Reports {
		for _, f := range r.Figures {
			if strings.HasSuffix(f, ".svg") {
				figures++
			}
		}
		if !strings.Contains(page, `id="lab-`+r.Lab+`"`) {
			t.Errorf("report.html has no section for lab %s", r.Lab)
		}
		for _, c := range r.Checks {
			if !strings.Contains(page, html.EscapeString(c.Name)) {
				t.Errorf("report.html lacks %s's check %q", r.Lab, c.Name)
			}
		}
	}
	if n := strings.Count(page, `src="data:image/svg+xml;base64,`); n != figures || n == 0 {
		t.Errorf("report.html inlines %d figures, the labs have %d", n, figures)
	}
	for _, a := range artifacts {
		if !strings.Contains(page, "<h2>"+html.EscapeString(a.name)) {
			t.Errorf("report.html has no section for artifact %q", a.name)
		}
	}
}

// chromium finds Debian's chromium (or another name of it).
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

var (
	artifactTable = regexp.MustCompile(`(?s)<table id="artifacts">.*?</table>`)
	tableRow      = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	tableCell     = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
)

// gateHTMLInChromium opens report.html in headless Chromium, reads the
// artifact table's verdicts and figures back from the rendered DOM, and
// checks them against report.json; a screenshot is kept beside them.
func gateHTMLInChromium(t *testing.T, dir string) {
	bin := chromium()
	if bin == "" {
		t.Skip("no chromium on PATH (apt-get install chromium; .ci/run installs it)")
	}
	page := "file://" + filepath.Join(dir, "report.html")
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
			"--user-data-dir=" + t.TempDir()}
		cmd := exec.CommandContext(ctx, bin, append(append(base, args...), page)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v", args, err)
		}
		return out
	}
	dom := string(run("--dump-dom"))
	tbl := artifactTable.FindString(dom)
	if tbl == "" {
		t.Fatalf("the rendered page has no artifact table:\n%.2000s", dom)
	}
	var got [][]string
	for _, row := range tableRow.FindAllStringSubmatch(tbl, -1) {
		var cells []string
		for _, c := range tableCell.FindAllStringSubmatch(row[1], -1) {
			cells = append(cells, html.UnescapeString(c[1]))
		}
		if len(cells) > 0 {
			got = append(got, cells)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := reports.ReadReport(data)
	if err != nil {
		t.Fatal(err)
	}
	want := saved.Tables[0]
	if len(got) != len(want.Rows) {
		t.Fatalf("the rendered artifact table has %d rows, report.json's %d", len(got), len(want.Rows))
	}
	sections := htmlSections(saved)
	verdicts := map[string]string{}
	for _, s := range sections {
		verdicts[s.Title] = s.Verdict
	}
	seen := 0
	for i, row := range want.Rows {
		for j, v := range row {
			if j >= len(got[i]) || got[i][j] != v.(string) {
				t.Errorf("rendered row %d cell %d = %q, report.json's %q", i+1, j+1, got[i], v)
			}
		}
		if name, _ := row[0].(string); name != "" {
			seen++
			if got[i][1] != verdicts[name] {
				t.Errorf("%s: rendered verdict %q, its labs' in report.json %q", name, got[i][1], verdicts[name])
			}
		}
	}
	if seen != len(artifacts) {
		t.Errorf("%d artifacts rendered, want %d", seen, len(artifacts))
	}
	shot := filepath.Join(dir, "report-screenshot.png")
	run("--screenshot="+shot, "--window-size=1280,2400", "--hide-scrollbars")
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.DecodeConfig(f)
	if err != nil || img.Width != 1280 {
		t.Errorf("screenshot %s: %v, %d px wide", shot, err, img.Width)
	}
	t.Logf("report.html rendered by %s; screenshot %s", bin, shot)
}
