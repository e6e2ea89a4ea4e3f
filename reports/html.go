package reports

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file writes a report as one self-contained HTML page: the figures
// inline (SVG as data: URIs), the style in the page, no script, no font or
// anything else fetched, readable on a laptop and printable. A summary
// (the exit gate) shows its own tables first, then a section per group of
// the reports it holds (the caller names the groups: this package knows
// no labs), each with its figures, tables and every check.

// HTMLSection groups reports under one heading: Title and the labs of the
// reports it shows, in order.
type HTMLSection struct {
	Title   string
	Verdict string
	Labs    []string
}

// WriteHTML writes r as a page. dir is where r's --out files are: a
// held report's figures are read from dir/LAB, r's own from dir. Reports
// held but in no section follow under "Other labs".
func (r *Report) WriteHTML(w io.Writer, dir string, sections []HTMLSection) error {
	page := htmlPage{Title: r.Lab + " — " + r.Title, Main: r.htmlReport(dir, true), Verdict: r.verdict(),
		Outcome: string(r.Outcome())}
	shown := map[string]bool{}
	for _, s := range sections {
		sec := htmlSection{Title: s.Title, Verdict: s.Verdict, Class: verdictClass(s.Verdict)}
		for _, lab := range s.Labs {
			for _, sub := range r.Reports {
				if sub.Lab == lab {
					sec.Reports = append(sec.Reports, sub.htmlReport(filepath.Join(dir, sub.Lab), false))
					shown[lab] = true
				}
			}
		}
		page.Sections = append(page.Sections, sec)
	}
	other := htmlSection{Title: "Other labs"}
	for _, sub := range r.Reports {
		if !shown[sub.Lab] {
			other.Reports = append(other.Reports, sub.htmlReport(filepath.Join(dir, sub.Lab), false))
		}
	}
	if len(other.Reports) > 0 {
		page.Sections = append(page.Sections, other)
	}
	return htmlTemplate.Execute(w, page)
}

func verdictClass(v string) string {
	v = strings.ToLower(v)
	for _, c := range []string{"pass", "fail", "inconclusive"} {
		if strings.HasPrefix(v, c) {
			return c
		}
	}
	return "none"
}

type htmlPage struct {
	Title, Verdict, Outcome string
	Main                    htmlReport
	Sections                []htmlSection
}

type htmlSection struct {
	Title, Verdict, Class string
	Reports               []htmlReport
}

type htmlReport struct {
	Lab, Title, Config, Env, Verdict, Outcome string
	Notes                                     []string
	Figures                                   []htmlFigure
	Tables                                    []htmlTable
}

type htmlFigure struct {
	Name string
	Img  template.HTML // the <img> with the SVG inline as a data: URI
}

type htmlTable struct {
	Title, ID string
	Consts    string
	Headers   []string
	Rows      [][]htmlCell
	Notes     []string
}

type htmlCell struct {
	Text, Class string
}

// htmlReport is one report's content; top also shows where it ran.
func (r *Report) htmlReport(dir string, top bool) htmlReport {
	h := htmlReport{Lab: r.Lab, Title: r.Title, Config: r.configLine(), Notes: r.Notes, Verdict: r.verdict(),
		Outcome: string(r.Outcome())}
	if top || r.Env.CPU != "" {
		h.Env = fmt.Sprintf("%s; %s; %s", r.Env.summary(), r.Env.buildLine(), r.Env.Time)
		if r.Env.Kernels.Len() > 0 {
			h.Env += "; kernels: " + r.Env.kernelLine()
		}
	}
	for _, name := range r.Figures {
		if !strings.HasSuffix(name, ".svg") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue // a report read back without its figures
		}
		stem := strings.TrimSuffix(name, ".svg")
		h.Figures = append(h.Figures, htmlFigure{Name: stem, Img: template.HTML(`<img src="data:image/svg+xml;base64,` +
			base64.StdEncoding.EncodeToString(data) + `" alt="` + template.HTMLEscapeString(stem) + `">`)})
	}
	tables := r.sections()
	if top && len(r.Reports) > 0 && len(r.Checks) > 0 {
		tables = tables[:len(tables)-1] // every check is shown under its lab
	}
	for i, t := range tables {
		f := t.format(false)
		ht := htmlTable{Title: f.title, Headers: f.headers, Notes: f.notes, Consts: strings.Join(f.consts, "; ")}
		if top && i == 0 && len(r.Reports) > 0 {
			ht.ID = "artifacts"
		}
		verdictCol := slices.Index(f.headers, "verdict")
		if verdictCol < 0 {
			verdictCol = slices.Index(f.headers, "result")
		}
		for _, row := range f.cells {
			var cells []htmlCell
			for j, c := range row {
				cell := htmlCell{Text: c}
				if f.numeric[j] {
					cell.Class = "num"
				}
				if j == verdictCol {
					cell.Class = "verdict " + verdictClass(c)
				}
				cells = append(cells, cell)
			}
			ht.Rows = append(ht.Rows, cells)
		}
		h.Tables = append(h.Tables, ht)
	}
	return h
}

var htmlTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; line-height: 1.4;
  max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #1b1b1b; background: #fff; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.25rem; border-bottom: 2px solid #ccc; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; } h4 { font-size: 0.95rem; margin: 1rem 0 0.3rem; }
table { border-collapse: collapse; margin: 0.3rem 0 1rem; font-size: 0.85rem; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.45rem; vertical-align: top; text-align: left; }
th { background: #f1f1f1; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.verdict, span.verdict { font-weight: 600; white-space: nowrap; }
.pass { color: #11631c; } .fail { color: #b00020; } .inconclusive { color: #8a5a00; } .none { color: #555; }
#artifacts td:first-child { font-weight: 600; }
.meta { color: #444; font-size: 0.85rem; overflow-wrap: anywhere; }
figure { margin: 0.5rem 0 1rem; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.8rem; color: #555; }
p.note { font-size: 0.85rem; }
@media print { body { max-width: none; margin: 0; font-size: 10pt; } h2 { break-before: page; }
  table, figure { break-inside: avoid; } a { color: inherit; } }
</style>
</head>
<body>
<h1>{{.Main.Lab}} — {{.Main.Title}}</h1>
<p class="meta">config: {{.Main.Config}}<br>env: {{.Main.Env}}</p>
<p><span class="verdict {{.Outcome}}" id="verdict">{{.Verdict}}</span></p>
{{template "report" .Main}}
{{range .Sections}}<section>
<h2>{{.Title}}{{if .Verdict}} — <span class="verdict {{.Class}}">{{.Verdict}}</span>{{end}}</h2>
{{range .Reports}}<h3 id="lab-{{.Lab}}">{{.Lab}} — {{.Title}}</h3>
<p class="meta">config: {{.Config}}{{if .Env}}<br>env: {{.Env}}{{end}}</p>
{{template "report" .}}<p><span class="verdict {{.Outcome}}">{{.Verdict}}</span></p>
{{end}}</section>
{{end}}</body>
</html>
{{define "report"}}{{range .Figures}}<figure>{{.Img}}<figcaption>{{.Name}}</figcaption></figure>
{{end}}{{range .Tables}}<h4>{{.Title}}</h4>
{{if .Consts}}<p class="meta">In every row: {{.Consts}}</p>{{end}}
<table{{if .ID}} id="{{.ID}}"{{end}}><thead><tr>{{range .Headers}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td{{if .Class}} class="{{.Class}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{end}}{{range .Notes}}<p class="note">{{.}}</p>
{{end}}{{end}}`))
