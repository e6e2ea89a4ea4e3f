package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gptlab/experiments/lab"
	"gptlab/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the README's command block from the commands")

// leafCommands are the commands that run (not groups).
func leafCommands() []*Command {
	var out []*Command
	for _, c := range commandSeq {
		if c.Setup != nil {
			out = append(out, c)
		}
	}
	return out
}

// TestUsageNamesEveryFlag: a command's usage line names every flag of its
// flag set, with the value name its help gives, and no other.
func TestUsageNamesEveryFlag(t *testing.T) {
	flagRE := regexp.MustCompile(`--([a-z0-9-]+)(?: ([A-Za-z=.]+))?`)
	for _, c := range leafCommands() {
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.Setup(fs)
		inUsage := map[string]string{}
		for _, m := range flagRE.FindAllStringSubmatch(c.Usage, -1) {
			inUsage[m[1]] = m[2]
			if fs.Lookup(m[1]) == nil {
				t.Errorf("%s: usage %q names --%s, which is not a flag", c.Name, c.Usage, m[1])
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			meta, ok := inUsage[f.Name]
			switch name, _ := flag.UnquoteUsage(f); {
			case !ok:
				t.Errorf("%s: usage %q lacks --%s", c.Name, c.Usage, f.Name)
			case isBoolFlag(f) && meta != "":
				t.Errorf("%s: --%s is a switch, the usage gives it a value %q", c.Name, f.Name, meta)
			case !isBoolFlag(f) && meta != name:
				t.Errorf("%s: usage says --%s %s, its help says %s", c.Name, f.Name, meta, name)
			}
		})
	}
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// TestHelp: --help on every command and gptlab help NAME print the usage
// and every flag with its default, exit 0 and fit 100 columns; help on a
// group lists its commands, help on a lab its settings.
func TestHelp(t *testing.T) {
	type want struct {
		args  []string
		words []string
	}
	var tests []want
	for _, c := range leafCommands() {
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.Setup(fs)
		var words []string
		fs.VisitAll(func(f *flag.Flag) { words = append(words, "--"+f.Name) })
		words = append(words, "usage: gptlab "+c.Name)
		if len(words) > 1 {
			words = append(words, "(default ")
		}
		tests = append(tests,
			want{append(strings.Fields(c.Name), "--help"), words},
			want{append([]string{"help"}, strings.Fields(c.Name)...), words})
	}
	tests = append(tests,
		want{[]string{"help"}, []string{"gptlab plan FILE.csv", "--capacity", "gptlab gpt sample", "exit status"}},
		want{[]string{"--help"}, []string{"gptlab run LAB"}},
		want{[]string{"help", "gpt"}, []string{"gptlab gpt train", "gptlab gpt grads", "settings of gptlab run gpt", "small"}},
		want{[]string{"gpt", "help"}, []string{"gptlab gpt eval"}},
		want{[]string{"gpt", "help", "train"}, []string{"usage: gptlab gpt train", "0.001", "tiny"}},
		want{[]string{"help", "bench"}, []string{"gptlab bench train"}},
		want{[]string{"bench", "--help"}, []string{"gptlab bench train"}},
		want{[]string{"help", "arena"}, []string{"configs", "tiny,small,baby", "tiny,small"}},
	)
	if planned := plannedLab(); planned != "" {
		tests = append(tests, want{[]string{"help", planned}, []string{"not built yet"}},
			want{[]string{"list"}, []string{"gpt", planned, "(not built yet)"}})
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := mainSays(t, tc.args, tc.words...)
			if n, line := testutil.WidestLine(out); n > 100 {
				t.Errorf("Main(%q): a line of %d characters:\n%s", tc.args, n, line)
			}
		})
	}
}

// TestHelpTrainDefaultsAreTrains: gpt train's help shows the defaults gpt
// train uses (tiny, lr 1e-3), the gpt lab's help the lab's (small, 0.01).
func TestHelpTrainDefaultsAreTrains(t *testing.T) {
	var b bytes.Buffer
	if err := writeHelp(&b, []string{"gpt", "train"}); err != nil {
		t.Fatal(err)
	}
	if row := lineWith(b.String(), "│ config"); !strings.Contains(row, "tiny") {
		t.Errorf("help gpt train: config row %q, want tiny", row)
	}
	if row := lineWith(b.String(), "│ lr"); !strings.Contains(row, "0.001") {
		t.Errorf("help gpt train: lr row %q, want 0.001", row)
	}
	b.Reset()
	l, _ := Find("gpt")
	if err := writeLabHelp(&b, l); err != nil {
		t.Fatal(err)
	}
	if row := lineWith(b.String(), "│ lr"); !strings.Contains(row, "0.01 ") {
		t.Errorf("help of the gpt lab: lr row %q, want 0.01", row)
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestREADMECommands: the README's command block is the commands' own
// list (go test ./experiments/cli -run TestREADMECommands -update rewrites it).
func TestREADMECommands(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const head = "## The command\n\n```\n"
	s := string(b)
	i := strings.Index(s, head)
	if i < 0 {
		t.Fatalf("README has no %q block", strings.TrimSpace(head))
	}
	start := i + len(head)
	end := start + strings.Index(s[start:], "```\n")
	got, want := s[start:end], synopsis("")
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:start]+want+s[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README's command block differs from the commands' list (run with -update):\n--- README\n%s--- commands\n%s", got, want)
}

// TestREADMELabs: the README's labs table is the list of labs
// (go test ./experiments/cli -run TestREADMELabs -update rewrites it).
func TestREADMELabs(t *testing.T) {
	const path = "../../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const head, tail = "<!-- labs -->\n", "<!-- /labs -->\n"
	s := string(b)
	i, j := strings.Index(s, head), strings.Index(s, tail)
	if i < 0 || j < i {
		t.Fatalf("README has no labs table between %q and %q", strings.TrimSpace(head), strings.TrimSpace(tail))
	}
	start := i + len(head)
	var ls []*lab.Lab
	for _, l := range Labs() {
		if !strings.HasPrefix(l.Name, "test-") { // the tests' own labs
			ls = append(ls, l)
		}
	}
	got, want := s[start:j], labsTable(ls)
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(s[:start]+want+s[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README's labs table differs from the list of labs (run with -update):\n--- README\n%s--- labs\n%s", got, want)
}

// TestGroupsListTheirSubcommands: a subcommand added from another file
// shows in its group's help and the top-level list without other edits.
func TestGroupsListTheirSubcommands(t *testing.T) {
	if got := subcommandNames("gpt"); !slices.Equal(strings.Split(got, ", "), []string{"train", "eval", "sample", "grads", "quantize"}) {
		t.Errorf("gpt subcommands = %q, want train, eval, sample, grads, quantize", got)
	}
	c := &Command{Name: "bench probe", Usage: "[--n K]", Short: "a subcommand added by a test",
		Setup: func(fs *flag.FlagSet) Runner { fs.Int("n", 1, "`K`"); return nil }}
	RegisterCommand(c)
	defer func() {
		delete(commands, c.Name)
		commandSeq = slices.DeleteFunc(commandSeq, func(x *Command) bool { return x == c })
	}()
	if !strings.Contains(synopsis(""), "gptlab bench probe [--n K]") {
		t.Errorf("a registered subcommand is not in the list:\n%s", synopsis(""))
	}
	code, out, _ := runMain("help", "bench")
	if code != 0 || !strings.Contains(out, "bench probe") {
		t.Errorf("help bench = %d, %q; want the new subcommand", code, out)
	}
}

// TestParseArgs: flags and positional arguments in any order; after "--"
// everything is positional (as launch will pass a command line on).
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		n    int
	}{
		{[]string{"FILE.csv", "--n", "3"}, []string{"FILE.csv"}, 3},
		{[]string{"--n", "3", "a", "b"}, []string{"a", "b"}, 3},
		{[]string{"--n", "2", "--", "run", "gpt", "--n", "9"}, []string{"run", "gpt", "--n", "9"}, 2},
		{[]string{"a", "--", "--n"}, []string{"a", "--n"}, 1},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("n", 1, "")
		pos, err := parseArgs(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *n != tc.n {
			t.Errorf("parseArgs(%q) = %q, n %d, %v; want %q, n %d", tc.args, pos, *n, err, tc.pos, tc.n)
		}
	}
}

// labsTable is the README's table of the labs, in markdown.
func labsTable(ls []*lab.Lab) string {
	var b strings.Builder
	b.WriteString("| lab | what it does |\n|---|---|\n")
	for _, l := range ls {
		fmt.Fprintf(&b, "| `%s` | %s |\n", l.Name, labLine(l))
	}
	return b.String()
}
