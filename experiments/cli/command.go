package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"gptlab/experiments/lab"
	"gptlab/parallel"
)

// Command is one gptlab command, a value as in Go's cmd/go: its usage
// line, its one-line help and its own flag set. The top-level help, each
// command's help (--help, gptlab help NAME) and the README's command list
// are all generated from these values, so they cannot disagree.
//
// A command with Setup nil is a group (gpt, bench): its subcommands are
// the commands named "GROUP SUB", listed in the order they registered.
type Command struct {
	Name  string // the words after gptlab: "plan", "gpt train"
	Usage string // what follows the name in the usage line: "FILE.csv [--algo NAME] ..."; every flag appears in it
	Short string // one line: what the command does
	Long  string // paragraphs for the command's help, printed before its flags (optional)
	// Setup defines the command's flags on fs, each with a `METAVAR` in its
	// usage text, and returns what runs the command with the arguments
	// left after the flags. Help calls Setup too, to list every flag with
	// its default.
	Setup func(fs *flag.FlagSet) Runner
	// Help, if set, writes more help after the flags (a lab's settings).
	Help func(w io.Writer)
}

// Runner runs a command. ctx is cancelled by Ctrl-C or SIGTERM: a runner
// that can stop early returns an error made by lab.Interruptedf saying, in
// plain words, what it saved.
type Runner func(ctx context.Context, args []string, stdout, stderr io.Writer) error

var (
	commands    = map[string]*Command{}
	commandSeq  []*Command // in registration order
	topCommands = []string{"list", "help", "run", "exit-gate", "report", "plan", "gpt", "bench", "launch", "serve"}
)

// RegisterCommand adds a command from its file's init. A subcommand
// ("bench allreduce") needs its group ("bench") registered too; a group
// is a Command with Setup nil. It panics on a duplicate name.
func RegisterCommand(c *Command) {
	if c.Name == "" || commands[c.Name] != nil {
		panic("experiments: command registered twice or without a name: " + c.Name)
	}
	commands[c.Name] = c
	commandSeq = append(commandSeq, c)
}

// subcommands are a group's commands in registration order.
func subcommands(group string) []*Command {
	var out []*Command
	for _, c := range commandSeq {
		if strings.HasPrefix(c.Name, group+" ") && !strings.Contains(c.Name[len(group)+1:], " ") {
			out = append(out, c)
		}
	}
	return out
}

// topLevel lists the commands without a group: those of the design in its
// order, then any others by name.
func topLevel() []*Command {
	var out, rest []*Command
	for _, name := range topCommands {
		if c := commands[name]; c != nil {
			out = append(out, c)
		}
	}
	for _, c := range commandSeq {
		if !strings.Contains(c.Name, " ") && !slices.Contains(topCommands, c.Name) {
			rest = append(rest, c)
		}
	}
	slices.SortFunc(rest, func(a, b *Command) int { return strings.Compare(a.Name, b.Name) })
	return append(out, rest...)
}

// Main runs the gptlab command line and returns the process exit status:
// 0 every check held, 1 a check failed, 2 bad usage or bad input, 3 an
// internal error, 130 interrupted. Ctrl-C and SIGTERM cancel the command's
// context; a command that does not stop within interruptGrace is left
// behind (Main returns 130 saying nothing was saved), and a second signal
// ends the process at once.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- lab.PanicError("gptlab", p, stderr)
			}
		}()
		done <- dispatch(ctx, args, stdout, stderr)
	}()
	select {
	case err := <-done:
		return exitStatus(err, stderr)
	case <-ctx.Done():
		stop() // the default behaviour again: a second signal ends the process
		select {
		case err := <-done:
			if err == nil || errors.Is(err, errChecksFailed) { // it finished as the signal came: still an interrupt
				err = lab.Interruptedf("interrupted as the command finished; what it printed and saved is complete")
			}
			return exitStatus(err, stderr)
		case <-time.After(interruptGrace):
			fmt.Fprintln(stderr, "gptlab: interrupted; nothing saved")
			return 130
		}
	}
}

// interruptGrace is how long an interrupted command has to stop and say
// what it saved (a training step and a checkpoint take far less).
const interruptGrace = 5 * time.Second

// Exit statuses.
const (
	exitChecksFailed = 1
	exitUsage        = 2
	exitInternal     = 3
	exitInterrupted  = 130
)

// exitStatus prints err on one line and maps it to the exit status.
func exitStatus(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errChecksFailed):
		return exitChecksFailed
	case errors.Is(err, lab.ErrInterrupted), errors.Is(err, context.Canceled):
		msg := "interrupted; nothing saved"
		if m, ok := lab.InterruptMessage(err); ok {
			msg = m
		}
		fmt.Fprintln(stderr, "gptlab:", msg)
		return exitInterrupted
	case errors.Is(err, lab.ErrUsage), errors.Is(err, lab.ErrNotBuilt), errors.Is(err, parallel.ErrUnsupported):
		fmt.Fprintln(stderr, "gptlab:", oneLine(err))
		return exitUsage
	}
	if errors.Is(err, lab.ErrInternal) {
		fmt.Fprintln(stderr, "gptlab:", oneLine(err))
	} else {
		fmt.Fprintln(stderr, "gptlab: internal error:", oneLine(err))
	}
	return exitInternal
}

// errChecksFailed: the report was printed and at least one check failed.
var errChecksFailed = errors.New("a check failed")

func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

func isHelpFlag(s string) bool { return s == "-h" || s == "-help" || s == "--help" }

// dispatch finds the command args name and runs it.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 { // as go and git do: a short start, not an error
		_, err := fmt.Fprint(stdout, start)
		return err
	}
	if isHelpFlag(args[0]) {
		_, err := fmt.Fprint(stdout, topUsage())
		return err
	}
	c := commands[args[0]]
	if c == nil {
		return lab.Usagef("unknown command %q (gptlab help lists them)", args[0])
	}
	return execute(ctx, c, args[1:], stdout, stderr)
}

// execute runs c with its arguments: a group picks its subcommand, a
// command parses its flags (--help prints its help) and runs.
func execute(ctx context.Context, c *Command, args []string, stdout, stderr io.Writer) error {
	if c.Setup == nil {
		subs := subcommandNames(c.Name)
		switch {
		case len(args) == 0:
			return lab.Usagef("%s: name a subcommand: %s (gptlab help %s)", c.Name, subs, c.Name)
		case args[0] == "help" || isHelpFlag(args[0]):
			return writeHelp(stdout, append(strings.Fields(c.Name), args[1:]...))
		}
		sub := commands[c.Name+" "+args[0]]
		if sub == nil {
			return lab.Usagef("%s: unknown subcommand %q (want %s)", c.Name, args[0], subs)
		}
		return execute(ctx, sub, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("gptlab "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := c.Setup(fs)
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		if c.Name == "run" { // run LAB --help: that lab's settings, as gptlab help LAB
			for _, a := range args {
				if l, err := Find(a); err == nil {
					return writeLabHelp(stdout, l)
				}
			}
		}
		return writeCommandHelp(stdout, c)
	}
	if err != nil {
		return lab.Usagef("%s: %s (gptlab help %s lists the flags)", c.Name, flagMessage(fs, err, args), c.Name)
	}
	if err := envError(); err != nil {
		return lab.Usagef("%v", err)
	}
	return run(ctx, pos, stdout, stderr)
}

func subcommandNames(group string) string {
	var names []string
	for _, s := range subcommands(group) {
		names = append(names, strings.TrimPrefix(s.Name, group+" "))
	}
	return strings.Join(names, ", ")
}

// parseArgs parses flags and positional arguments in any order; after
// "--" everything is positional (launch passes a command line on).
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// flagMessage rewrites the flag package's errors in gptlab's words:
// "--steps "x": not an integer", "--seed ...: out of range",
// "unknown flag --sed".
func flagMessage(fs *flag.FlagSet, err error, args []string) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		for _, a := range args { // as it was typed: -x, --sed
			if typed, _, _ := strings.Cut(a, "="); strings.HasPrefix(typed, "-") && strings.TrimLeft(typed, "-") == name {
				return "unknown flag " + typed
			}
		}
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return "--" + strings.TrimLeft(name, "-") + " needs a value"
	}
	var value, name, reason string
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -steps: parse error
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			value = rest[:i]
			name, reason, _ = strings.Cut(rest[i+len(" for flag -"):], ": ")
		}
	}
	if name == "" {
		return msg
	}
	f := fs.Lookup(name)
	switch {
	case reason == "value out of range":
		reason = "out of range"
	case reason == "parse error" && f != nil:
		reason = "not " + flagKind(f)
	}
	if _, ok := f.Value.(*lab.SetFlag); f != nil && ok {
		return reason // the --set error names itself
	}
	return fmt.Sprintf("--%s %s: %s", name, value, reason)
}

// flagKind names what a flag takes: "an integer", "a number", ….
func flagKind(f *flag.Flag) string {
	switch fmt.Sprintf("%T", f.Value) {
	case "*flag.intValue", "*flag.int64Value":
		return "an integer"
	case "*flag.uintValue", "*flag.uint64Value":
		return "a non-negative integer"
	case "*flag.float64Value":
		return "a number"
	case "*flag.boolValue":
		return "true or false"
	case "*flag.durationValue":
		return "a duration (such as 10s or 1m30s)"
	}
	return "a valid value"
}
