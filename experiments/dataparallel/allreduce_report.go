package dataparallel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"gptlab/experiments/lab"
	"gptlab/internal/crc32c"
	"gptlab/parallel"
	"gptlab/reports"
)

// The targets of the comparison with OpenMPI, as ratios of medians
// measured in one run.
const (
	shmTargetLarge = 1.5 // shm against vader at 16 MiB
	shmTargetSmall = 3.0 // shm against vader at 4 KiB
	tcpTargetLarge = 1.5 // tcp against OpenMPI's tcp BTL at 16 MiB
)

// OpenMPISweeps runs the same sweep through OpenMPI's MPI_Allreduce, once
// over its shared-memory BTL (vader) and once over TCP, under mpirun; the
// note says what was run or why nothing was. A run that was started and
// failed, or whose report could not be read, is an error: the comparison
// the report exists for would otherwise drop out unnoticed.
func OpenMPISweeps(ctx context.Context, cfg AllreduceConfig, ranks int, log io.Writer) ([]*Sweep, string, error) {
	if cfg.MPI == "off" {
		return nil, "OpenMPI's MPI_Allreduce was not measured (--set mpi=off).", nil
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		return nil, "OpenMPI's MPI_Allreduce was not measured: mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev).", nil
	}
	bin, why := mpiBinary(cfg.MPI)
	if bin == "" {
		return nil, "OpenMPI's MPI_Allreduce was not measured: " + why, nil
	}
	var out []*Sweep
	for _, btl := range []struct{ name, list string }{{"mpi-vader", "self,vader"}, {"mpi-tcp", "self,tcp"}} {
		args := []string{"-np", strconv.Itoa(ranks), "--mca", "btl", btl.list}
		if os.Geteuid() == 0 {
			args = append(args, "--allow-run-as-root")
		}
		args = append(args, bin, "bench", "allreduce", "--set", "transport=mpi",
			"--set", fmt.Sprintf("min-bytes=%d", cfg.MinBytes), "--set", fmt.Sprintf("max-bytes=%d", cfg.MaxBytes), "--format", "json")
		fmt.Fprintf(log, "bench allreduce: OpenMPI over %s (mpirun -np %d)\n", btl.list, ranks)
		cmd := exec.CommandContext(ctx, mpirun, args...)
		cmd.Env = withoutJobEnv(os.Environ())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			return out, "", fmt.Errorf("OpenMPI's run over %s failed: %w: %s", btl.list, err, firstLine(stderr.String()))
		}
		s, err := parseSweep(stdout)
		if err != nil {
			return out, "", fmt.Errorf("OpenMPI's run over %s: %w", btl.list, err)
		}
		s.name = btl.name
		out = append(out, s)
	}
	return out, fmt.Sprintf("OpenMPI: %s with --mca btl self,vader (mpi-vader) and self,tcp (mpi-tcp), the same sweep "+
		"through MPI_Barrier and MPI_Allreduce (%s).", mpirun, bin), nil
}

// mpiBinary finds a gptlab built with -tags mpi.
func mpiBinary(setting string) (string, string) {
	if setting != "auto" {
		if _, err := os.Stat(setting); err != nil {
			return "", fmt.Sprintf("--set mpi=%s: %v.", setting, err)
		}
		return setting, ""
	}
	self, _ := os.Executable()
	if parallel.MPIBuilt {
		return self, ""
	}
	if p := filepath.Join(filepath.Dir(self), "gptlab-mpi"); fileExists(p) {
		return p, ""
	}
	if p, err := exec.LookPath("gptlab-mpi"); err == nil {
		return p, ""
	}
	return "", "this gptlab has no MPI backend and no gptlab-mpi was found beside it or on PATH (go build -tags mpi -o gptlab-mpi .)."
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// withoutJobEnv drops the launcher's variables, so mpirun's ranks take
// their place from MPI alone.
func withoutJobEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case parallel.EnvRank, parallel.EnvWorldSize, parallel.EnvLocalRank, parallel.EnvMasterAddr, parallel.EnvMasterPort,
			parallel.EnvJob, parallel.EnvDeadline, parallel.EnvLauncher:
			continue
		}
		out = append(out, kv)
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// parseSweep reads the per-transport table of a JSON report: bytes and
// iterations as numbers, times in seconds.
func parseSweep(data []byte) (*Sweep, error) {
	var r reports.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("its report: %w", err)
	}
	for _, t := range r.Tables {
		if !strings.HasPrefix(t.Title, "Sweep over ") {
			continue
		}
		col := map[string]int{}
		for i, c := range t.Columns {
			col[c.Name] = i
		}
		s := &Sweep{}
		if v, ok := r.Metrics.Get("ranks"); ok {
			f, _ := v.(float64)
			s.ranks = int(f)
		}
		num := func(row []any, name string) (float64, bool) {
			i, ok := col[name]
			if !ok || i >= len(row) {
				return 0, false
			}
			switch v := row[i].(type) {
			case float64:
				return v, true
			case time.Duration: // a duration column comes back typed
				return v.Seconds(), true
			}
			return 0, false
		}
		for _, row := range t.Rows {
			b, ok1 := num(row, "bytes")
			it, ok2 := num(row, "iterations")
			med, ok3 := num(row, "median")
			mn, ok4 := num(row, "min")
			if !ok1 || !ok2 || !ok3 || !ok4 {
				return nil, fmt.Errorf("unreadable sweep row %v", row)
			}
			s.rows = append(s.rows, sweepRow{bytes: int(b), iters: int(it), median: secDur(med), min: secDur(mn), sent: math.NaN()})
		}
		if v, ok := r.Metrics.Get("wrong_sizes"); ok {
			f, _ := v.(float64)
			s.wrong = int(f)
		}
		return s, nil
	}
	return nil, fmt.Errorf("no sweep table in its report")
}

func secDur(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// timeText is a duration for a sentence: µs below a millisecond, else ms.
func timeText(d time.Duration) string {
	if d < time.Millisecond {
		return fmt.Sprintf("%.4g µs", us(d))
	}
	return fmt.Sprintf("%.4g ms", us(d)/1e3)
}

// offModel is how far sent is from the ring model's bytes, relative to
// the model: 0 for 0 of 0 (one rank sends nothing), +Inf for bytes where
// the model has none.
func offModel(sent, model float64) float64 {
	if model == 0 {
		if sent == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(sent-model) / model
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// busFactor is NCCL-tests' correction from algorithm to bus bandwidth for
// an all-reduce on p ranks: 2(p-1)/p.
func busFactor(p int) float64 { return 2 * float64(p-1) / float64(p) }

// sizeUnit splits a size into a count and its binary unit: 4, "KiB".
func sizeUnit(b int) (int, string) {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return b >> 20, "MiB"
	case b >= 1<<10 && b%(1<<10) == 0:
		return b >> 10, "KiB"
	}
	return b, "B"
}

// sizeName is 4kib, 16mib: the metric names' spelling of a size.
func sizeName(b int) string {
	n, u := sizeUnit(b)
	return fmt.Sprintf("%d%s", n, strings.ToLower(u))
}

func sizeLabel(b int) string {
	n, u := sizeUnit(b)
	return fmt.Sprintf("%d %s", n, u)
}

func (s *Sweep) at(bytes int) (sweepRow, bool) {
	for _, r := range s.rows {
		if r.bytes == bytes {
			return r, true
		}
	}
	return sweepRow{}, false
}

func findSweep(sweeps []*Sweep, name string) *Sweep {
	for _, s := range sweeps {
		if s.name == name {
			return s
		}
	}
	return nil
}

// alphaBeta fits t = α + n/bw to the medians, least squares on the
// relative error (weights 1/t²), so the small sizes count as much as the
// large ones.
func alphaBeta(s *Sweep) (alpha time.Duration, gbps, worst float64) {
	x, y, w := make([]float64, len(s.rows)), make([]float64, len(s.rows)), make([]float64, len(s.rows))
	for i, r := range s.rows {
		x[i], y[i] = float64(r.bytes), r.median.Seconds()
		w[i] = 1 / (y[i] * y[i])
	}
	a, b := stat.LinearRegression(x, y, w, false)
	for i := range x {
		worst = max(worst, math.Abs(a+b*x[i]-y[i])/y[i])
	}
	return time.Duration(a * 1e9), 1 / b / 1e9, worst
}

// AllreduceReport is rank 0's report of every sweep; mpiErr is OpenMPI's
// run's failure, a failed check.
func AllreduceReport(sweeps []*Sweep, cfg AllreduceConfig, mpiNote string, mpiErr error) *reports.Report {
	r := reports.New("bench-allreduce", fmt.Sprintf("All-reduce of float32 on %s: time, bandwidth, bytes", reports.Count(sweeps[0].ranks, "rank")))
	r.Config.Set("transport", cfg.Transport)
	r.Config.Set("min-bytes", cfg.MinBytes)
	r.Config.Set("max-bytes", cfg.MaxBytes)
	r.Config.Set("mpi", cfg.MPI)
	r.Metric("ranks", sweeps[0].ranks)
	wrong := 0
	for _, s := range sweeps {
		wrong += s.wrong
	}
	r.Metric("wrong_sizes", wrong)
	addSweeps(r, sweeps, false)
	if mpiErr != nil {
		r.Check("OpenMPI measured beside ours", false, "%v", mpiErr)
	}
	targetChecks(r, sweeps)
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.Note("Load average when the report was written: %s (timings on a busy machine are slower and noisier).", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	if findSweep(sweeps, "tcp") != nil {
		r.Note("TCP frames carry a CRC-32C of header and payload, computed by the sender and checked by the receiver; here by %s (package internal/crc32c). OpenMPI's TCP transport adds no checksum of its own.", crc32c.Kernel())
	}
	if mpiNote != "" {
		r.Note("%s", mpiNote)
	}
	r.Note("CPU processes on one machine: the figures teach the latency and bandwidth terms of the ring; they say nothing about GPU interconnects.")
	return r
}

// addSweeps adds the sweeps' metrics (allreduce_4kib_us and
// allreduce_16mib_ms of the first), a table each, the side-by-side
// medians, the alpha-beta fit, the checks of sums and bytes, and the
// figures. In a lab's report (lab) the tables and checks say "all-reduce".
func addSweeps(r *reports.Report, sweeps []*Sweep, lab bool) {
	title := func(s *Sweep) string { return "Sweep over " + s.name } // parseSweep reads these
	check := func(s *Sweep) string { return s.name }
	if lab {
		title = func(s *Sweep) string { return "All-reduce over " + s.name + " by size" }
		check = func(s *Sweep) string { return "all-reduce over " + s.name }
	}
	primary := sweeps[0]
	if row, ok := primary.at(4 << 10); ok {
		r.Metric("allreduce_4kib_us", us(row.median))
	}
	if row, ok := primary.at(16 << 20); ok {
		r.Metric("allreduce_16mib_ms", us(row.median)/1e3)
	}

	for _, s := range sweeps {
		t := r.AddTable(title(s), reports.Bytes("bytes"), reports.Int("iterations"),
			reports.Duration("median", time.Microsecond, 2), reports.Duration("min", time.Microsecond, 2),
			reports.Float("algbw GB/s", 3), reports.Float("busbw GB/s", 3), reports.Bytes("sent/rank"))
		for _, row := range s.rows {
			alg := float64(row.bytes) / row.median.Seconds() / 1e9
			var sent any // nil: not observed
			if !math.IsNaN(row.sent) {
				sent = row.sent
			}
			t.Row(row.bytes, row.iters, row.median, row.min, alg, alg*busFactor(s.ranks), sent)
		}
	}
	if len(sweeps) > 1 {
		compareTable(r, sweeps)
	}
	var fit *reports.Table
	for _, s := range sweeps {
		if len(s.rows) < 3 { // two points fit any line exactly: no test of the model
			continue
		}
		if fit == nil {
			fit = r.AddTable("All-reduce alpha-beta fit: t = α + n/bw (relative least squares over the sizes)", reports.Text("transport"),
				reports.Duration("α", time.Microsecond, 2), reports.Float("bw GB/s", 3), reports.Percent("worst residual", 0))
		}
		a, bw, worst := alphaBeta(s)
		fit.Row(s.name, a, bw, worst)
		key := strings.ReplaceAll(s.name, "-", "_")
		r.Metric(key+"_alpha_us", us(a))
		r.Metric(key+"_bandwidth_gb_per_s", bw)
	}

	for _, s := range sweeps {
		r.Check(check(s)+": sums exact", s.wrong == 0, "%d sizes, %d off the exact sum", len(s.rows), s.wrong)
		if math.IsNaN(s.rows[0].sent) {
			continue
		}
		worst := 0.0
		for _, row := range s.rows {
			worst = max(worst, offModel(row.sent, parallel.RingBytes(int64(row.bytes), s.ranks)))
		}
		r.Check(check(s)+": bytes sent = 2(p-1)/p·N", worst <= 0.01, "worst over the sizes: %.2g%% off the ring model", 100*worst)
	}
	addAllreduceFigures(r, sweeps)
	if lab {
		r.Note("The all-reduce by size is gptlab bench allreduce's sweep, run on the lab's ranks over its transport; `gptlab launch --nproc 2 -- bench allreduce` sweeps both transports and sets OpenMPI's beside them.")
	}
	r.Note("Per size: one all-reduce of known values checks the sum (exact: the inputs are multiples of 1/64) and counts the bytes; then %d untimed, then %d batches, each a barrier and back-to-back all-reduces timed on rank 0; time is the median (and min) over the batches of the time per all-reduce. algbw = bytes/time; busbw = algbw·2(p-1)/p, NCCL-tests' bus bandwidth for all-reduce (equal to algbw on 2 ranks).", warmup, batches)
}

// compareTable sets the medians side by side, with the ratios the targets name.
func compareTable(r *reports.Report, sweeps []*Sweep) {
	cols := []reports.Column{reports.Text("size")}
	for _, s := range sweeps {
		cols = append(cols, reports.Duration(s.name, time.Microsecond, 2))
	}
	shm, tcp, vader, otcp := findSweep(sweeps, "shm"), findSweep(sweeps, "tcp"), findSweep(sweeps, "mpi-vader"), findSweep(sweeps, "mpi-tcp")
	var pairs [][2]*Sweep
	if shm != nil && vader != nil {
		cols = append(cols, reports.Ratio("shm/vader"))
		pairs = append(pairs, [2]*Sweep{shm, vader})
	}
	if tcp != nil && otcp != nil {
		cols = append(cols, reports.Ratio("tcp/mpi-tcp"))
		pairs = append(pairs, [2]*Sweep{tcp, otcp})
	}
	t := r.AddTable("Median all-reduce time side by side (one run)", cols...)
	for _, row := range sweeps[0].rows {
		cells := []any{sizeLabel(row.bytes)}
		for _, s := range sweeps {
			var cell any // nil: not measured at this size
			if x, ok := s.at(row.bytes); ok {
				cell = x.median
			}
			cells = append(cells, cell)
		}
		for _, pair := range pairs {
			a, ok1 := pair[0].at(row.bytes)
			b, ok2 := pair[1].at(row.bytes)
			var cell any
			if ok1 && ok2 {
				cell = a.median.Seconds() / b.median.Seconds()
			}
			cells = append(cells, cell)
		}
		t.Row(cells...)
	}
}

// targetChecks holds the ratios against OpenMPI to the targets.
func targetChecks(r *reports.Report, sweeps []*Sweep) {
	for _, tg := range []struct {
		ours, theirs string
		bytes        int
		target       float64
	}{
		{"shm", "mpi-vader", 16 << 20, shmTargetLarge},
		{"shm", "mpi-vader", 4 << 10, shmTargetSmall},
		{"tcp", "mpi-tcp", 16 << 20, tcpTargetLarge},
	} {
		a, b := findSweep(sweeps, tg.ours), findSweep(sweeps, tg.theirs)
		if a == nil || b == nil {
			continue
		}
		x, ok1 := a.at(tg.bytes)
		y, ok2 := b.at(tg.bytes)
		if !ok1 || !ok2 {
			continue
		}
		ratio := x.median.Seconds() / y.median.Seconds()
		r.Metric(fmt.Sprintf("%s_vs_%s_%s_ratio", tg.ours, strings.ReplaceAll(tg.theirs, "-", "_"), sizeName(tg.bytes)), ratio)
		// Decided over our batches, each against OpenMPI's median (its
		// batches stay in its own process's report).
		var rounds []float64
		for _, b := range x.batches {
			rounds = append(rounds, b.Seconds()/y.median.Seconds())
		}
		r.TimedCheck(fmt.Sprintf("%s within %.1fx of %s at %s", tg.ours, tg.target, tg.theirs, sizeLabel(tg.bytes)),
			lab.RatioTarget{Target: tg.target}.Decide(rounds),
			"%s / %s = %.2fx (medians); rounds: our batches over its median", timeText(x.median), timeText(y.median), ratio)
	}
}

var sweepColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// addAllreduceFigures draws time and bus bandwidth against size.
func addAllreduceFigures(r *reports.Report, sweeps []*Sweep) {
	for _, fig := range []struct {
		name, title, ylab string
		y                 func(s *Sweep, row sweepRow) float64
		logY              bool
	}{
		{"allreduce-time", "All-reduce median time", "µs", func(_ *Sweep, row sweepRow) float64 { return us(row.median) }, true},
		{"allreduce-busbw", "All-reduce bus bandwidth (NCCL-tests)", "GB/s", func(s *Sweep, row sweepRow) float64 {
			return float64(row.bytes) / row.median.Seconds() / 1e9 * busFactor(s.ranks)
		}, false},
	} {
		p := plot.New()
		p.Title.Text = fig.title
		p.X.Label.Text = "bytes per rank"
		p.Y.Label.Text = fig.ylab
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		if fig.logY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		p.Legend.Top, p.Legend.Left = true, true
		for i, s := range sweeps {
			pts := make(plotter.XYs, len(s.rows))
			for j, row := range s.rows {
				pts[j] = plotter.XY{X: float64(row.bytes), Y: fig.y(s, row)}
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				continue
			}
			l.Color, sc.Color = sweepColors[i%len(sweepColors)], sweepColors[i%len(sweepColors)]
			p.Add(l, sc)
			p.Legend.Add(s.name, l, sc)
		}
		p.Add(plotter.NewGrid())
		r.AddFigure(fig.name, p, 16*vg.Centimeter, 10*vg.Centimeter)
	}
}
