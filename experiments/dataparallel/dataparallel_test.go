package dataparallel

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gptlab/experiments/lab"
	"gptlab/experiments/lab/labtest"
	"gptlab/internal/testutil"
	"gptlab/models"
	"gptlab/parallel"
	"gptlab/reports"
)

func TestDPBuckets(t *testing.T) {
	tests := []struct {
		name          string
		n, first, cap int // elements, bytes, bytes
		want          []dpBucket
	}{
		{"first smaller", 10, 8, 12, []dpBucket{{8, 10}, {5, 8}, {2, 5}, {0, 2}}},
		{"uniform", 9, 12, 12, []dpBucket{{6, 9}, {3, 6}, {0, 3}}},
		{"one bucket for everything", 9, 1 << 20, 1 << 20, []dpBucket{{0, 9}}},
		{"first holds it all", 4, 64, 4, []dpBucket{{0, 4}}},
		{"a cap below one element", 3, 1, 1, []dpBucket{{2, 3}, {1, 2}, {0, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := dpBuckets(tc.n, tc.first, tc.cap); !slices.Equal(got, tc.want) {
				t.Errorf("dpBuckets(%d, %d, %d) = %v, want %v", tc.n, tc.first, tc.cap, got, tc.want)
			}
		})
	}
}

func TestDPSplit(t *testing.T) {
	s := newDPSplit([]int{5, 3})
	if w0, w1 := s.weight(0), s.weight(1); w0 != 0.625 || w1 != 0.375 {
		t.Errorf("weights of 5+3 = %v, %v; want 0.625, 0.375", w0, w1)
	}
	idx := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	tgt := []int32{10, 11, 12, 13, 14, 15, 16, 17}
	a, b := s.rows(1, 1, idx, tgt)
	if !slices.Equal(a, []int32{5, 6, 7}) || !slices.Equal(b, []int32{15, 16, 17}) {
		t.Errorf("rank 1's rows of 5+3 (T=1) = %v, %v; want the last three", a, b)
	}
	if e := equalSplit(8, 2); !slices.Equal(e.n, []int{4, 4}) || !slices.Equal(e.off, []int{0, 4}) {
		t.Errorf("equalSplit(8, 2) = %+v", e)
	}
}

// TestDPComparisons: the measures the checks read react to what they
// measure.
func TestDPComparisons(t *testing.T) {
	mc, _ := models.Preset("tiny")
	p := models.NewParams(mc, 1)
	ref := slices.Clone(p.Data())
	if d, _ := maxRelDiff(p, ref, ref); d != 0 {
		t.Errorf("maxRelDiff of a tensor with itself = %g", d)
	}
	got := slices.Clone(ref)
	w := p.Slice("transformer.h.1.mlp.c_fc.weight")
	off := p.Offset("transformer.h.1.mlp.c_fc.weight")
	for i := range w {
		got[off+i] *= 1.001
	}
	if d, at := maxRelDiff(p, got, ref); math.Abs(d-1e-3) > 1e-6 || at != "transformer.h.1.mlp.c_fc.weight" {
		t.Errorf("maxRelDiff with one tensor scaled by 1.001 = %g at %s; want 1e-3 there", d, at)
	}
	if n := countDiffer(got, ref); n != len(w) {
		t.Errorf("countDiffer = %d, want %d", n, len(w))
	}
	g := []float32{1, 1e-7, 1}
	if q := compareParams([]float32{1, 1, 1}, []float32{1, 1, 1}, g, 1e-3); q.overTight+q.overLoose != 0 || q.tight != 2 || q.loose != 1 {
		t.Errorf("equal parameters: %+v", q)
	}
	if q := compareParams([]float32{1.0001, 1.002, 1}, []float32{1, 1, 1}, g, 1e-3); q.overTight != 1 || q.overLoose != 0 {
		t.Errorf("1e-4 off where the gradient is large, 2e-3 where tiny: %+v; want one beyond 1e-5, none beyond 3·lr", q)
	}
	if q := compareParams([]float32{1, 1.004, 1}, []float32{1, 1, 1}, g, 1e-3); q.overLoose != 1 {
		t.Errorf("4e-3 off where the gradient is tiny: %+v; want beyond 3·lr", q)
	}
}

// onTwoRanks runs f on the two ranks of a job in this process, each its
// own communicator over transport.
func onTwoRanks(t *testing.T, transport string, f func(c *parallel.Comm) error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	master := l.Addr().String()
	l.Close()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for rank := range 2 {
		wg.Go(func() {
			c, err := parallel.Join(context.Background(), parallel.Env{Rank: rank, WorldSize: 2, Master: master},
				parallel.Options{Transport: transport, Deadline: 30 * time.Second})
			if err != nil {
				errs[rank] = err
				return
			}
			errs[rank] = f(c)
			if cerr := c.Close(); errs[rank] == nil {
				errs[rank] = cerr
			}
		})
	}
	wg.Wait()
	for rank, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", rank, err)
		}
	}
}

// TestDPStepperReduces: the overlapped bucketed reduction and the one
// after the backward both leave, in every element, the sum of the two
// ranks' weighted gradients as each computes it alone (bitwise: a sum
// of two terms does not depend on their order); with overlap and several
// buckets the first all-reduce starts while gradients are still to come.
func TestDPStepperReduces(t *testing.T) {
	mc, _ := models.Preset("tiny")
	p := models.NewParams(mc, 3)
	data, err := models.DefaultCorpus(3, mc.Block)
	if err != nil {
		t.Fatal(err)
	}
	bt, _ := models.NewBatcher(data.Train, 3, mc.Block, 3, models.StreamTrain)
	idx, tgt := bt.Batch()
	split := newDPSplit([]int{2, 1})
	// each rank's weighted gradient, computed alone
	var want [2][]float32
	for r := range 2 {
		m, err := models.NewModel(mc, p.Clone(), split.n[r], mc.Block, true)
		if err != nil {
			t.Fatal(err)
		}
		i, g := split.rows(r, mc.Block, idx, tgt)
		if _, err := m.Step(i, g); err != nil {
			t.Fatal(err)
		}
		grad, _ := models.NewAdamW(m.Params(), models.DefaultAdamW()).Gradients(m)
		for j := range grad {
			grad[j] *= split.weight(r)
		}
		want[r] = grad
		m.Close()
	}
	sum := make([]float32, len(want[0]))
	for j := range sum {
		sum[j] = want[0][j] + want[1][j]
	}
	n := p.Count()
	for _, tc := range []struct {
		name      string
		transport string
		buckets   []dpBucket
		overlap   bool
	}{
		{"overlap, 1 KiB buckets, shm", "shm", dpBuckets(n, 1<<10, 1<<10), true},
		{"after the backward, 1 KiB buckets, shm", "shm", dpBuckets(n, 1<<10, 1<<10), false},
		{"overlap, 4 KiB buckets, tcp", "tcp", dpBuckets(n, 4<<10, 4<<10), true},
		{"one bucket, tcp", "tcp", dpBuckets(n, 4*n, 4*n), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onTwoRanks(t, tc.transport, func(c *parallel.Comm) error {
				m, err := models.NewModel(mc, p.Clone(), split.n[c.Rank()], mc.Block, true)
				if err != nil {
					return err
				}
				defer m.Close()
				s := newDPStepper(c, m, tc.buckets, split.weight(c.Rank()), tc.overlap)
				if err := m.OnGradReady(s.ready); err != nil {
					return err
				}
				i, g := split.rows(c.Rank(), mc.Block, idx, tgt)
				if _, err := s.backward(i, g); err != nil {
					return err
				}
				if k := countDiffer(s.flat, sum); k != 0 {
					t.Errorf("rank %d: %d of %d elements differ from the sum of the weighted gradients", c.Rank(), k, n)
				}
				early := tc.overlap && len(tc.buckets) > 1
				if early != (s.toComeAtFirst > 0) {
					t.Errorf("rank %d: %d gradients still to come when the first of %d all-reduces started (overlap %v)",
						c.Rank(), s.toComeAtFirst, len(tc.buckets), tc.overlap)
				}
				return nil
			})
		})
	}
}

// dpTestConfig is a small job for the tests: tiny, three steps, a short
// sweep.
func dpTestConfig() *dpConfig {
	c := dpDefaults
	c.Config, c.Steps, c.TimedSteps, c.SweepKiB = "tiny", 3, 1, []int{4}
	c.Unequal = slices.Clone(c.Unequal)
	if testutil.Trimmed() { // emulated -short: the all-reduce sweep to 1 MiB, not 64 MiB (natively the whole)
		c.AllreduceKiB = []int{4, 64, 1024}
	}
	return &c
}

// TestDPChecksCanFail runs the lab's body on two ranks in this process;
// every check passes, and each fails when the quantity it reads is made
// wrong.
func TestDPChecksCanFail(t *testing.T) {
	cfg := dpTestConfig()
	var d *dpResult
	onTwoRanks(t, "shm", func(c *parallel.Comm) error {
		res, err := dataParallelRank(context.Background(), c, cfg, lab.Options{Seed: 1, Log: io.Discard})
		if c.Rank() == 0 {
			d = res
		}
		return err
	})
	checks := func(d *dpResult) map[string]bool {
		r := reports.New("data-parallel", "test")
		d.report(r)
		out := map[string]bool{}
		for _, c := range r.Checks {
			out[c.Name] = c.Pass
		}
		return out
	}
	for name, pass := range checks(d) {
		if !pass {
			t.Errorf("check %q failed on a correct run", name)
		}
	}
	// clone copies what the sabotage below changes.
	clone := func(d *dpResult) *dpResult {
		e := *d
		dp := *d.dp
		e.dp = &dp
		e.dp.final = slices.Clone(d.dp.final)
		e.weighted, e.plain = slices.Clone(d.weighted), slices.Clone(d.plain)
		e.sums = slices.Clone(d.sums)
		for i := range e.sums {
			e.sums[i].Moved = slices.Clone(d.sums[i].Moved)
		}
		e.timings = slices.Clone(d.timings)
		return &e
	}
	for _, tc := range []struct {
		check string
		spoil func(d *dpResult)
	}{
		{"equal shards: reduced gradient = full batch's", func(d *dpResult) { d.dp.first = d.plain }},
		{"unequal shards weighted by sample count = full batch's", func(d *dpResult) { d.weighted = d.plain }},
		{"unequal shards, plain average: wrong (negative control)", func(d *dpResult) { d.plain = d.ref.first }},
		{"DP: every rank's parameters bitwise rank 0's", func(d *dpResult) { d.sums[1].Differ = 1 }},
		{"DP within 1e-05 of one process after 3 steps", func(d *dpResult) { d.dp.final[0] += 1e-2 }},
		{"ZeRO-1 parameters bitwise plain DP's", func(d *dpResult) { d.sums[0].ZeroDiffer = 3 }},
		{"DP: bytes sent per rank = 2(p-1)/p·N within 1%, every step", func(d *dpResult) {
			d.sums[1].Moved[2][parallel.AllReduce].Sent += d.sums[1].Moved[2][parallel.AllReduce].Sent / 50
		}},
		{"every step issues exactly its collectives on every rank", func(d *dpResult) {
			d.sums[0].Moved[1][parallel.Broadcast].Calls++
		}},
		{"ZeRO-1: AdamW state per rank = 1/P of unsharded", func(d *dpResult) { d.sums[1].ZeroState = d.sums[1].DPState }},
		{"overlap: the first all-reduce starts while the backward still runs", func(d *dpResult) {
			for i := range d.timings {
				d.timings[i].toCome = 0
			}
		}},
	} {
		e := clone(d)
		tc.spoil(e)
		got := checks(e)
		if pass, ok := got[tc.check]; !ok || pass {
			t.Errorf("check %q: present %v, passed %v after it was made wrong", tc.check, ok, pass)
		}
	}
}

func TestDataParallelBadInput(t *testing.T) {
	mpi := struct{ set, want string }{"transport=mpi", "under mpirun"} // a -tags mpi build, not under mpirun
	if !parallel.MPIBuilt {
		mpi.want = "built without MPI"
	}
	for _, tc := range []struct{ set, want string }{
		mpi,
		{"unequal=4,4", "unequal=4,4"},
		{"unequal=5,2", "summing to batch=8"},
		{"batch=7", "batch=7"},
		{"ranks=1", "ranks=1"},
		{"transport=udp", "transport=udp"},
		{"bucket-mb=0", "bucket-mb=0"},
		{"sweep-kib=0", "sweep-kib=0"},
		{"allreduce-kib=3,0", "allreduce-kib=3,0"},
		{"steps=0", "steps=0"},
		{"config=huge", "config=huge"},
	} {
		_, err := labtest.Run(Lab, false, tc.set)
		if !errors.Is(err, lab.ErrUsage) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("run data-parallel --set %s: %v; want bad usage, one line naming %q", tc.set, err, tc.want)
		}
	}
}
