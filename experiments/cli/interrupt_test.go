package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"gptlab/experiments/lab"
	"gptlab/reports"
)

// test-linger is a lab that finishes a second after it starts whatever
// happens: what a lab in a loop that does not look at its context does.
func init() {
	type lingerConfig struct {
		For time.Duration `set:"for" help:"how long the lab runs, interrupted or not"`
	}
	labs = append(labs, lab.New("test-linger", "a lab that ignores interrupts", lingerConfig{For: time.Second}, nil,
		func(ctx context.Context, cfg *lingerConfig, opt lab.Options) (*reports.Report, error) {
			fmt.Fprintln(opt.Log, "linger: started")
			time.Sleep(cfg.For)
			r := reports.New("test-linger", "lingered")
			r.AddTable("how long", reports.Duration("lingered", time.Millisecond, 0)).Row(cfg.For)
			r.Check("it ran", true, "for %v", cfg.For)
			return r, nil
		}))
}

// TestInterruptLateInALab: an interrupt means exit 130 and one line, even
// when the lab would finish within the grace period after the signal (a
// lab interrupted late once printed its whole report and exited 0).
func TestInterruptLateInALab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the checkpoint and arena labs (--quick) up to their last phase")
	}
	for _, tc := range []struct {
		name  string
		ready string
		sig   os.Signal
		args  []string
	}{
		{"checkpoint, Ctrl-C while the last shape measures its chain", `^checkpoint: small: measuring the chain`, os.Interrupt,
			[]string{"run", "checkpoint", "--quick"}},
		{"checkpoint, SIGTERM while the last shape measures its chain", `^checkpoint: small: measuring the chain`, syscall.SIGTERM,
			[]string{"run", "checkpoint", "--quick"}},
		{"arena, Ctrl-C at its first line", `^arena`, os.Interrupt, []string{"run", "arena", "--quick"}},
		{"a lab that finishes within the grace", `^linger: started`, os.Interrupt, []string{"run", "test-linger"}},
		{"a lab that finishes within the grace, SIGTERM, --out", `^linger: started`, syscall.SIGTERM,
			[]string{"run", "test-linger", "--out", "DIR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			for i, a := range tc.args {
				if a == "DIR" {
					tc.args[i] = dir
				}
			}
			code, last := interruptGptlab(t, regexp.MustCompile(tc.ready), tc.sig, tc.args...)
			if _, err := os.Stat(filepath.Join(dir, "report.json")); err == nil {
				t.Errorf("gptlab %q, %v: wrote a report after the interrupt", tc.args, tc.sig)
			}
			if code != 130 || !strings.HasPrefix(last, "gptlab: interrupted") {
				t.Errorf("gptlab %q, %v: exit %d, last line %q; want 130 and one line saying it was interrupted", tc.args, tc.sig, code, last)
			}
		})
	}
}
