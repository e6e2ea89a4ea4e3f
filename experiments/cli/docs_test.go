package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gptlab/reports"
)

// The outputs in README.md and docs/*.md are captured by docs/capture.sh
// between <!-- capture: ARGS [| FILTER] --> and <!-- /capture --> lines,
// the fenced block starting with "$ gptlab ARGS [| FILTER]". The tests here
// keep what those blocks say about settings equal to what the code prints
// now, without running anything beyond the gate's shared --quick run:
//
//   - run LAB --quick: the block's config line (with its indented
//     continuation lines) must equal the one LAB's --quick report prints
//     now, rendered as text at reports.Width columns.
//   - help LAB: every row of the settings table the block shows must be
//     in `gptlab help LAB`'s output now, and, when the filter keeps the
//     whole table (none, or tail -n +N), every row of it must be in the
//     block.
//
// Every other block (exit-gate, a run with --set, bench, launch) is not
// checked here: its output needs a run of its own (the full gate, a
// benchmark, a job of several processes) that the tests do not afford;
// docs/capture.sh refills them.

// docPages are the files docs/capture.sh refills, from experiments/cli.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../../README.md"}, pages...)
}

// capture is one captured block of a page.
type capture struct {
	line   int    // the marker's line number, from 1
	spec   string // what the marker names: "ARGS" or "ARGS | FILTER"
	args   []string
	filter string   // the shell filter after " | ", or ""
	body   []string // the block's lines after its "$ gptlab" line
}

var captureMarker = regexp.MustCompile(`^<!-- capture: (.*) -->$`)

// parseCaptures reads every captured block of a page, as capture.sh does.
func parseCaptures(text string) ([]capture, error) {
	lines := strings.Split(text, "\n")
	var caps []capture
	for i := 0; i < len(lines); i++ {
		m := captureMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		c := capture{line: i + 1, spec: m[1]}
		args, filter, _ := strings.Cut(c.spec, " | ")
		c.args, c.filter = strings.Fields(args), strings.TrimSpace(filter)
		if i+2 >= len(lines) || lines[i+1] != "```" || lines[i+2] != "$ gptlab "+c.spec {
			return nil, fmt.Errorf("line %d: the marker is not followed by a fence and the line \"$ gptlab %s\"", c.line, c.spec)
		}
		j := i + 3
		for ; j < len(lines) && lines[j] != "```"; j++ {
			c.body = append(c.body, lines[j])
		}
		if j+1 >= len(lines) || lines[j+1] != "<!-- /capture -->" {
			return nil, fmt.Errorf("line %d: the block has no closing fence and <!-- /capture --> line", c.line)
		}
		caps = append(caps, c)
		i = j + 1
	}
	return caps, nil
}

// configLines returns the config line of lab's report in text lines (the
// line after the title line "LAB — ...", and the continuation lines
// indented under it), or nil when the lines hold no such title.
func configLines(lines []string, lab string) []string {
	for i, l := range lines {
		if !strings.HasPrefix(l, lab+" — ") {
			continue
		}
		i++
		for i < len(lines) && strings.HasPrefix(lines[i], "  ") { // the title's own wrap
			i++
		}
		if i == len(lines) || !strings.HasPrefix(lines[i], "config: ") {
			return nil
		}
		out := []string{lines[i]}
		for _, c := range lines[i+1:] {
			if !strings.HasPrefix(c, strings.Repeat(" ", len("config: "))) {
				break
			}
			out = append(out, c)
		}
		return out
	}
	return nil
}

// settingsRows returns the rows of the text tables in lines (the lines
// drawn with a box's vertical bar, the header row included).
func settingsRows(lines []string) []string {
	var rows []string
	for _, l := range lines {
		if strings.HasPrefix(l, "│") {
			rows = append(rows, l)
		}
	}
	return rows
}

// settingsDiff says which key=value pairs of the config lines got and want
// differ (the lines joined, so a wrap in another place is no difference of
// its own).
func settingsDiff(got, want []string) string {
	pairs := func(ls []string) []string {
		return strings.Fields(strings.TrimPrefix(strings.Join(ls, " "), "config: "))
	}
	g, w := pairs(got), pairs(want)
	var only []string
	for _, p := range g {
		if !slices.Contains(w, p) {
			only = append(only, "page has "+p)
		}
	}
	for _, p := range w {
		if !slices.Contains(g, p) {
			only = append(only, "code prints "+p)
		}
	}
	if len(only) == 0 {
		return "the same pairs, wrapped differently"
	}
	return strings.Join(only, "; ")
}

// printsNow is what the code prints now for the blocks that are checked.
type printsNow struct {
	config func(lab string) ([]string, error) // lab's --quick config lines
	help   func(lab string) ([]string, error) // gptlab help lab's lines
}

// keepsWholeTable reports whether a capture's filter leaves a help
// table whole: no filter, or one that drops only lines before it.
var keepsWholeTable = regexp.MustCompile(`^(|tail -n \+[0-9]+)$`)

// checkCaptures returns the differences between the page's captured
// blocks and what the code prints now, and how many blocks were checked.
func checkCaptures(page, text string, now printsNow) (problems []string, checked int, err error) {
	caps, err := parseCaptures(text)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", page, err)
	}
	for _, c := range caps {
		at := fmt.Sprintf("%s:%d (gptlab %s)", page, c.line, c.spec)
		switch {
		case len(c.args) == 3 && c.args[0] == "run" && c.args[2] == "--quick":
			lab := c.args[1]
			got := configLines(c.body, lab)
			if got == nil {
				if c.filter == "" {
					problems = append(problems, at+": the block shows no config line under its title")
				}
				continue // a filter that left the config out: nothing to compare
			}
			want, err := now.config(lab)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", at, err))
				continue
			}
			checked++
			if !slices.Equal(got, want) {
				problems = append(problems, fmt.Sprintf("%s: the config differs (%s); run bash docs/capture.sh %s\n--- page\n%s\n--- code\n%s",
					at, settingsDiff(got, want), strings.TrimPrefix(page, "../../"), strings.Join(got, "\n"), strings.Join(want, "\n")))
			}
		case len(c.args) == 2 && c.args[0] == "help":
			out, err := now.help(c.args[1])
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", at, err))
				continue
			}
			docRows, codeRows := settingsRows(c.body), settingsRows(out)
			if len(docRows) == 0 && len(codeRows) == 0 {
				continue // a command's help, not a lab's: no settings table
			}
			checked++
			if len(docRows) == 0 {
				problems = append(problems, at+": the block shows no settings table")
			}
			for _, r := range docRows {
				if !slices.Contains(codeRows, r) {
					problems = append(problems, fmt.Sprintf("%s: help no longer prints the row\n%s", at, r))
				}
			}
			if keepsWholeTable.MatchString(c.filter) {
				for _, r := range codeRows {
					if !slices.Contains(docRows, r) {
						problems = append(problems, fmt.Sprintf("%s: the page lacks the row help prints now\n%s", at, r))
					}
				}
			}
		}
	}
	return problems, checked, nil
}

// quickText is lab's --quick report from the gate's run, as text at
// reports.Width columns.
func quickText(t *testing.T, name string) ([]string, error) {
	for _, r := range quickGateReport(t).Reports {
		if r.Lab == name {
			var b bytes.Buffer
			if err := r.WriteTextWidth(&b, reports.Width); err != nil {
				return nil, err
			}
			return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"), nil
		}
	}
	return nil, fmt.Errorf("the exit gate ran no lab %q", name)
}

// helpText is gptlab help name's output, run in-process.
func helpText(name string) ([]string, error) {
	code, out, errs := runMain("help", name)
	if code != 0 {
		return nil, fmt.Errorf("gptlab help %s: exit status %d: %s", name, code, strings.TrimSpace(errs))
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n"), nil
}

// currentPrints is what the code prints now: the gate's --quick reports
// and gptlab help.
func currentPrints(t *testing.T) printsNow {
	return printsNow{
		config: func(name string) ([]string, error) {
			text, err := quickText(t, name)
			if err != nil {
				return nil, err
			}
			lines := configLines(text, name)
			if lines == nil {
				return nil, fmt.Errorf("lab %s's --quick report prints no config line", name)
			}
			return lines, nil
		},
		help: helpText,
	}
}

// TestDocsCapturesCurrent: the config lines of every page's captured
// run LAB --quick block, and the settings rows of its help LAB blocks, are
// what the code prints now.
func TestDocsCapturesCurrent(t *testing.T) {
	now := currentPrints(t)
	total := 0
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		problems, checked, err := checkCaptures(page, string(b), now)
		if err != nil {
			t.Fatal(err)
		}
		total += checked
		for _, p := range problems {
			t.Error(p)
		}
	}
	// README and docs hold a run and a help block of every built lab but
	// the exit gate itself: far more than a handful.
	if total < 10 {
		t.Errorf("checked %d captured blocks; the pages hold more: is the marker syntax still capture.sh's?", total)
	}
	t.Logf("checked %d captured blocks", total)
}

// TestDocsCapturesDoctored: the same check on a page as capture.sh would
// write it now (lab's help and --quick run, captured from the code), and
// on doctored copies of it: each change is reported, the page as it is
// reports nothing.
func TestDocsCapturesDoctored(t *testing.T) {
	now := currentPrints(t)
	// page is a page with lab's help (its first two lines left out, as the
	// docs do) and its --quick report in full.
	page := func(t *testing.T, lab string) []string {
		help, err := helpText(lab)
		if err != nil {
			t.Fatal(err)
		}
		run, err := quickText(t, lab)
		if err != nil {
			t.Fatal(err)
		}
		var p []string
		p = append(p, "# "+lab, "", "<!-- capture: help "+lab+" | tail -n +3 -->", "```", "$ gptlab help "+lab+" | tail -n +3")
		p = append(p, help[2:]...)
		p = append(p, "```", "<!-- /capture -->", "", "<!-- capture: run "+lab+" --quick -->", "```", "$ gptlab run "+lab+" --quick")
		p = append(p, run...)
		return append(p, "```", "<!-- /capture -->", "")
	}
	// find is the index of the first line with prefix, after the line at from.
	find := func(t *testing.T, lines []string, from int, prefix string) int {
		for i := from + 1; i < len(lines); i++ {
			if strings.HasPrefix(lines[i], prefix) {
				return i
			}
		}
		t.Fatalf("the page has no line starting %q: doctor another lab", prefix)
		return -1
	}
	// lastPair splits a line's last key=value pair off it.
	lastPair := func(l string) (head, key, value string) {
		i := strings.LastIndexByte(l, ' ')
		key, value, _ = strings.Cut(l[i+1:], "=")
		return l[:i+1], key, value
	}
	const wrapped = "        " // a config line's continuation
	tests := []struct {
		name    string
		lab     string
		checked int                                                 // blocks compared: the help and the run
		doctor  func(t *testing.T, p []string) ([]string, []string) // the page doctored, the problems it must report
	}{
		{"arena as it is", "arena", 2, func(t *testing.T, p []string) ([]string, []string) { return p, nil }},
		{"checkpoint as it is", "checkpoint", 2, func(t *testing.T, p []string) ([]string, []string) { return p, nil }},
		{"a config value changed", "arena", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, 0, "config: ")
			head, k, v := lastPair(p[i])
			p[i] = head + k + "=" + v + "0"
			return p, []string{"the config differs (page has " + k + "=" + v + "0; code prints " + k + "=" + v + ")"}
		}},
		{"a config key renamed", "arena", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, 0, "config: ")
			p[i] = strings.Replace(p[i], "config: ", "config: old-", 1)
			return p, []string{"page has old-"}
		}},
		{"a value on a continuation line changed", "checkpoint", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, find(t, p, 0, "config: "), wrapped)
			head, k, v := lastPair(p[i])
			p[i] = head + k + "=" + v + "x"
			return p, []string{"the config differs (page has " + k + "=" + v + "x; code prints " + k + "=" + v + ")"}
		}},
		{"a continuation line lost", "checkpoint", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, find(t, p, 0, "config: "), wrapped)
			_, k, v := lastPair(p[i])
			return slices.Delete(p, i, i+1), []string{"code prints " + k + "=" + v + ")"}
		}},
		{"the config line lost", "arena", 1, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, 0, "config: ")
			return slices.Delete(p, i, i+1), []string{"the block shows no config line under its title"}
		}},
		{"a help row changed", "arena", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, find(t, p, 0, "├"), "│")
			old := p[i]
			p[i] = strings.Replace(old, "│ ", "│_", 2)
			return p, []string{"help no longer prints the row\n" + p[i], "the page lacks the row help prints now\n" + old}
		}},
		{"a help row dropped", "checkpoint", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, find(t, p, 0, "├"), "│")
			return slices.Delete(slices.Clone(p), i, i+1), []string{"the page lacks the row help prints now\n" + p[i]}
		}},
		{"a help row added", "arena", 2, func(t *testing.T, p []string) ([]string, []string) {
			i := find(t, p, find(t, p, 0, "├"), "│")
			row := "│ retired   │ 1               │ =          │ a setting the lab no longer has                    │"
			return slices.Insert(p, i, row), []string{"help no longer prints the row\n" + row}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doctored, want := tt.doctor(t, page(t, tt.lab))
			problems, checked, err := checkCaptures(tt.lab+".md", strings.Join(doctored, "\n"), now)
			if err != nil {
				t.Fatal(err)
			}
			if checked != tt.checked {
				t.Errorf("checked %d blocks, want %d", checked, tt.checked)
			}
			ok := len(problems) == len(want)
			for i := 0; ok && i < len(want); i++ {
				ok = strings.Contains(problems[i], want[i])
			}
			if !ok {
				t.Errorf("problems reported:\n%s\nwant %d, saying in order:\n%s", strings.Join(problems, "\n"), len(want), strings.Join(want, "\n"))
			}
		})
	}
}

// TestParseCaptures: the block parser reads capture.sh's syntax and
// refuses a block it would refuse.
func TestParseCaptures(t *testing.T) {
	const good = "text\n<!-- capture: run reuse --quick | head -3 -->\n```\n$ gptlab run reuse --quick | head -3\nreuse — R\nconfig: a=1\n```\n<!-- /capture -->\n"
	tests := []struct {
		name    string
		text    string
		args    []string
		filter  string
		body    int
		wantErr bool
	}{
		{"a block with a filter", good, []string{"run", "reuse", "--quick"}, "head -3", 2, false},
		{"no closing marker", strings.TrimSuffix(good, "<!-- /capture -->\n"), nil, "", 0, true},
		{"a command line other than the marker's", strings.Replace(good, "$ gptlab run reuse --quick | head -3", "$ gptlab run reuse", 1), nil, "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caps, err := parseCaptures(tt.text)
			if tt.wantErr {
				if err == nil {
					t.Errorf("parsed %+v, want an error", caps)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(caps) != 1 || !slices.Equal(caps[0].args, tt.args) || caps[0].filter != tt.filter || len(caps[0].body) != tt.body || caps[0].line != 2 {
				t.Errorf("parsed %+v, want one block at line 2: args %q, filter %q, %d lines", caps, tt.args, tt.filter, tt.body)
			}
		})
	}
}
