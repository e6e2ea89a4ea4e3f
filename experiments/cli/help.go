package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// This file writes every help text from the Command values and the labs'
// configs: the top-level usage, a command's help, a lab's settings.

const shortColumn = 46 // where a command's one line starts in the list

// synopsis is the list of commands, one usage line each with its one-line
// help, groups expanded to their subcommands, each line indent in and
// wrapped within the report width. The README's command block is this
// text unindented (TestREADMECommands).
func synopsis(indent string) string {
	var b strings.Builder
	for _, c := range topLevel() {
		list := []*Command{c}
		if c.Setup == nil {
			list = subcommands(c.Name)
		}
		for _, s := range list {
			writeUsageLine(&b, s, indent)
		}
	}
	return b.String()
}

// writeUsageLine writes "gptlab NAME USAGE" and the one-line help: beside
// it when both fit a line, else under it, indented.
func writeUsageLine(w io.Writer, c *Command, indent string) {
	line := strings.TrimSpace("gptlab " + c.Name + " " + c.Usage)
	if len(indent)+len(line) < shortColumn-1 && shortColumn+len([]rune(c.Short)) <= reports.Width {
		fmt.Fprintf(w, "%s%-*s%s\n", indent, shortColumn-len(indent), line, c.Short)
		return
	}
	writeUsage(w, indent, line)
	for _, l := range reports.Wrap(c.Short, reports.Width-len(indent)-8) {
		fmt.Fprintf(w, "%s        %s\n", indent, l)
	}
}

// writeUsage writes a usage line wrapped to the width between its
// arguments (a bracketed group stays whole), continued four spaces in.
func writeUsage(w io.Writer, indent, line string) {
	var parts []string
	depth, start := 0, 0
	for i, r := range line {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case r == ' ' && depth == 0:
			parts = append(parts, line[start:i])
			start = i + 1
		}
	}
	parts = append(parts, line[start:])
	cur := indent
	for _, p := range parts {
		if strings.TrimSpace(cur) != "" && len([]rune(cur))+1+len([]rune(p)) > reports.Width {
			fmt.Fprintln(w, cur)
			cur = indent + "    " + p
			continue
		}
		if strings.TrimSpace(cur) == "" {
			cur += p
		} else {
			cur += " " + p
		}
	}
	fmt.Fprintln(w, cur)
}

// topUsage is `gptlab help`.
// start is what gptlab with no arguments prints: what it is and the first
// commands to try.
const start = `gptlab runs the labs of "Memory Planning, Precision, and Distributed Execution" on a
small GPT, and prints each lab's measurements and checks as a table report.

Try:
  gptlab exit-gate --quick     every lab, quick: the five artifacts and every check (about a minute)
  gptlab run reuse --quick     one lab: buffer liveness and reuse
  gptlab list                  the labs
  gptlab help                  every command, its flags, the exit statuses
`

func topUsage() string {
	var b strings.Builder
	b.WriteString("gptlab runs the labs of \"Memory Planning, Precision, and Distributed Execution\".\n\nusage:\n")
	b.WriteString(synopsis("  "))
	b.WriteString("\n\n")
	for _, p := range []string{exitStatusHelp, "gptlab help LAB shows a lab's settings; gptlab help COMMAND a command's usage and flags; gptlab list names the labs."} {
		for _, l := range reports.Wrap(p, reports.Width) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

const exitStatusHelp = "exit status: 0 every check held; 1 a check in the report failed; 2 bad usage or bad input, " +
	"with one line naming the flag, key, file or value at fault; 3 an internal error (GPTLAB_TRACE=1 prints its stack); " +
	"130 interrupted by Ctrl-C or SIGTERM, saying what was saved."

// writeHelp is `gptlab help WORDS...`: a command's help, a lab's settings,
// or both when a lab and a command share the name (gpt).
func writeHelp(w io.Writer, words []string) error {
	if len(words) == 0 {
		_, err := fmt.Fprint(w, topUsage())
		return err
	}
	name := strings.Join(words, " ")
	c := commands[name]
	l, labErr := Find(name)
	if c == nil && labErr != nil {
		return lab.Usagef("help: no lab or command %q (gptlab list names the labs, gptlab help the commands)", name)
	}
	if c != nil {
		if err := writeCommandHelp(w, c); err != nil {
			return err
		}
	}
	if labErr == nil {
		if c != nil {
			fmt.Fprintf(w, "\nThe %s lab (gptlab run %s):\n", l.Name, l.Name)
		}
		return writeLabHelp(w, l)
	}
	return nil
}

// writeCommandHelp is a command's --help: usage, what it does, its flags.
func writeCommandHelp(w io.Writer, c *Command) error {
	if c.Setup == nil {
		fmt.Fprintf(w, "usage: gptlab %s %s ...\n\n", c.Name, strings.ReplaceAll(subcommandNames(c.Name), ", ", "|"))
		writeParagraphs(w, c.Short+".\n"+c.Long)
		fmt.Fprintln(w, "\ncommands:")
		for _, s := range subcommands(c.Name) {
			writeUsageLine(w, s, "  ")
		}
		fmt.Fprintf(w, "\ngptlab help %s COMMAND shows a command's flags.\n", c.Name)
		return nil
	}
	writeUsage(w, "", strings.TrimSpace("usage: gptlab "+c.Name+" "+c.Usage))
	fmt.Fprintln(w)
	writeParagraphs(w, c.Short+".\n"+c.Long)
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.Setup(fs)
	writeFlags(w, fs)
	if c.Help != nil {
		fmt.Fprintln(w)
		c.Help(w)
	}
	return nil
}

// writeParagraphs writes text wrapped to the width, a paragraph a line,
// a blank line between paragraphs.
func writeParagraphs(w io.Writer, text string) {
	first := true
	for _, p := range strings.Split(strings.TrimSpace(text), "\n") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		for _, l := range reports.Wrap(strings.ToUpper(p[:1])+p[1:], reports.Width) {
			fmt.Fprintln(w, l)
		}
	}
}

// writeFlags lists every flag of fs with its value name, its help and its
// default (always, also when it is zero or empty).
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	type entry struct{ head, help string }
	var entries []entry
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		meta, help := flag.UnquoteUsage(f)
		head := "--" + f.Name
		if fmt.Sprintf("%T", f.Value) != "*flag.boolValue" {
			head += " " + meta
		}
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		if !strings.Contains(help, "(default") { // a help that says its default in words keeps it
			help += " (default " + def + ")"
		}
		entries = append(entries, entry{head, help})
		width = max(width, len([]rune(head)))
	})
	if len(entries) == 0 {
		return
	}
	fmt.Fprintln(w, "\nflags:")
	col := min(width, 24) + 4
	for _, e := range entries {
		lines := reports.Wrap(e.help, reports.Width-col)
		first := fmt.Sprintf("  %-*s", col-2, e.head)
		if len([]rune(e.head)) > col-3 {
			fmt.Fprintf(w, "  %s\n", e.head)
			first = strings.Repeat(" ", col)
		}
		fmt.Fprintln(w, first+lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintln(w, strings.Repeat(" ", col)+l)
		}
	}
}

// writeLabHelp lists a lab's settings: key, default, the value --quick
// gives it, and what it means.
func writeLabHelp(w io.Writer, l *lab.Lab) error {
	fmt.Fprintf(w, "%s: %s\n", l.Name, l.Short)
	if !l.Built {
		fmt.Fprintln(w, "not built yet")
		return nil
	}
	quick, err := l.Config(true, nil)
	if err != nil {
		return err
	}
	t := settingsTable(l.Defaults(), quick)
	intro := fmt.Sprintf("settings of gptlab run %s --set key=value (the --quick column: the value --quick gives, \"=\" where it keeps the default; --set wins over both):", l.Name)
	for _, line := range reports.Wrap(intro, reports.Width) {
		fmt.Fprintln(w, line)
	}
	return t.WriteText(w, reports.Width)
}

// settingsTable is the settings of a config struct: key, default, the
// value in quick if not nil, and the help text.
func settingsTable(defaults, quick any) *reports.Table {
	cols := []reports.Column{reports.Text("key"), reports.Text("default")}
	if quick != nil {
		cols = append(cols, reports.Text("--quick"))
	}
	t := &reports.Table{Columns: append(cols, reports.Text("meaning"))}
	var qf []lab.Field
	if quick != nil {
		qf = lab.Fields(quick)
	}
	for i, f := range lab.Fields(defaults) {
		row := []any{f.Key, defaultCell(f.Value.Interface())}
		if quick != nil {
			q := defaultCell(qf[i].Value.Interface())
			if q == row[1] {
				q = "="
			}
			row = append(row, q)
		}
		t.Row(append(row, f.Help)...)
	}
	return t
}

// defaultCell shows a setting's value as --set takes it ("" for empty).
func defaultCell(v any) string {
	v = lab.Text(v)
	s := reports.Cell(v)
	if f, ok := v.(float64); ok {
		s = fmt.Sprint(f)
	}
	if s == "" {
		return `""`
	}
	return s
}
