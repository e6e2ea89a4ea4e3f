package parallel

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// workers are the scenarios a test job's ranks run (see TestMain).
var workers = map[string]func(c *Comm) error{
	"collectives": checkCollectives,
	"kill":        killScenario,
	"rejoin-kill": rejoinKillScenario,
	"corrupt":     corruptScenario,
	"hang":        hangScenario,
	"exit3":       func(c *Comm) error { c.Barrier(); os.Exit(3); return nil },
	"sleep":       func(c *Comm) error { time.Sleep(time.Minute); return nil },
	"wrapped": func(c *Comm) error {
		if os.Getenv("WRAPPED") != "1" {
			return fmt.Errorf("WRAPPED=%q: the worker did not run through %s", os.Getenv("WRAPPED"), EnvExec)
		}
		return c.Barrier()
	},
	// launched: print this worker's pid, then sleep (TestLauncherDeath).
	"pid": func(c *Comm) error {
		fmt.Fprintf(os.Stderr, "pid %d\n", os.Getpid())
		time.Sleep(time.Minute)
		return nil
	},
}

// checkCollectives runs every collective against the single-process math
// (ringSum), bitwise, and checks the bytes each moved against its model.
// The MPI tests run it too (mpi_test.go), without the byte models.
func checkCollectives(c *Comm) error {
	p, r := c.Size(), c.Rank()
	exactBytes := c.Transport() != "mpi"
	for _, n := range []int{0, 1, p + 1, 1000, 1<<16 + 3, 300_007} {
		x := inputs(p, n)
		want := ringSum(x)

		before := c.Stats()
		buf := slices.Clone(x[r])
		if err := c.AllReduce(buf); err != nil {
			return err
		}
		if err := sameBits("all-reduce", n, buf, want); err != nil {
			return err
		}
		if err := nearSum(x, buf); err != nil {
			return err
		}
		if exactBytes {
			got := c.Stats().Sub(before).Of(AllReduce)
			// Reduce-scatter step s sends segment r-s-1 and receives r-s-2;
			// all-gather step s sends r-s and receives r-s-1.
			var sent, recvd int64
			seg := func(i int) int64 { lo, hi := Segment(n, p, (i%p+p)%p); return int64(4 * (hi - lo)) }
			for s := 0; s < p-1; s++ {
				sent += seg(r-s-1) + seg(r-s)
				recvd += seg(r-s-2) + seg(r-s-1)
			}
			if got.Sent != sent || got.Received != recvd {
				return fmt.Errorf("all-reduce n=%d: sent %d, received %d bytes, want %d and %d", n, got.Sent, got.Received, sent, recvd)
			}
			if ring := RingBytes(int64(4*n), p); n >= 1000 && math.Abs(float64(got.Sent)-ring) > 0.01*ring {
				return fmt.Errorf("all-reduce n=%d: sent %d bytes, ring model 2(p-1)/p·N = %.0f: off by more than 1%%", n, got.Sent, ring)
			}
		}

		before = c.Stats()
		buf = slices.Clone(x[r])
		if err := c.ReduceScatter(buf); err != nil {
			return err
		}
		lo, hi := c.Segment(n)
		if err := sameBits("reduce-scatter", n, buf[lo:hi], want[lo:hi]); err != nil {
			return err
		}
		if exactBytes {
			got := c.Stats().Sub(before).Of(ReduceScatter)
			if ring := float64(p-1) / float64(p) * float64(4*n); n >= 1000 && math.Abs(float64(got.Sent)-ring) > 0.01*ring {
				return fmt.Errorf("reduce-scatter n=%d: sent %d bytes, model (p-1)/p·N = %.0f", n, got.Sent, ring)
			}
		}

		buf = make([]float32, n)
		copy(buf[lo:hi], want[lo:hi])
		if err := c.AllGather(buf); err != nil {
			return err
		}
		if err := sameBits("all-gather", n, buf, want); err != nil {
			return err
		}

		root := p - 1
		before = c.Stats()
		buf = make([]float32, n)
		if r == root {
			copy(buf, x[root])
		}
		if err := c.Broadcast(buf, root); err != nil {
			return err
		}
		if err := sameBits("broadcast", n, buf, x[root]); err != nil {
			return err
		}
		if exactBytes {
			got := c.Stats().Sub(before).Of(Broadcast)
			wantSent := int64(4 * n)
			if (r-root+p)%p == p-1 {
				wantSent = 0 // the last rank of the chain forwards nothing
			}
			if got.Sent != wantSent {
				return fmt.Errorf("broadcast n=%d: rank %d sent %d bytes, want %d", n, r, got.Sent, wantSent)
			}
		}
	}

	msg := make([]byte, 100)
	if r == 0 {
		copy(msg, "from rank 0")
	}
	if err := c.BroadcastBytes(msg, 0); err != nil {
		return err
	}
	if got := string(msg[:11]); got != "from rank 0" {
		return fmt.Errorf("broadcast bytes: got %q", got)
	}
	if err := c.Barrier(); err != nil {
		return err
	}

	// Asynchronous all-reduces complete in issue order whatever order
	// they are waited in, with the same bits as the synchronous one.
	const n = 50_000
	x := inputs(p, n)
	want := ringSum(x)
	var hs []*Handle
	var bufs [][]float32
	for range 3 {
		b := slices.Clone(x[r])
		bufs = append(bufs, b)
		hs = append(hs, c.AllReduceAsync(b))
	}
	sync := slices.Clone(x[r])
	if err := c.AllReduce(sync); err != nil {
		return err
	}
	for i := len(hs) - 1; i >= 0; i-- {
		if err := hs[i].Wait(); err != nil {
			return err
		}
		if err := sameBits("async all-reduce "+strconv.Itoa(i), n, bufs[i], want); err != nil {
			return err
		}
	}
	return sameBits("all-reduce after async", n, sync, want)
}

func sameBits(what string, n int, got, want []float32) error {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return fmt.Errorf("%s n=%d: element %d = %g, single-process ring sum %g", what, n, i, got[i], want[i])
		}
	}
	return nil
}

// nearSum compares with the float64 sum: the order of a float32 sum
// changes its bits, not its value beyond a few ulps.
func nearSum(x [][]float32, got []float32) error {
	for i := range got {
		var s, a float64
		for r := range x {
			s += float64(x[r][i])
			a += math.Abs(float64(x[r][i]))
		}
		if math.Abs(float64(got[i])-s) > 1e-6*a {
			return fmt.Errorf("all-reduce: element %d = %g, float64 sum %g", i, got[i], s)
		}
	}
	return nil
}

// failingRank is the rank the failure scenarios damage (TEST_RANK, default 1).
func failingRank() int {
	if r := atoiEnv("TEST_RANK"); r > 0 {
		return r
	}
	return 1
}

// loop runs all-reduces of 1 MiB until one fails.
func loop(c *Comm) error {
	buf := make([]float32, 1<<18)
	for i := 0; i < 1000; i++ {
		if err := c.AllReduce(buf); err != nil {
			return err
		}
	}
	return fmt.Errorf("1000 all-reduces and no failure")
}

// atFrame makes the failing rank send itself sig after its 5th frame, in
// the middle of an all-reduce, saying when on stderr.
func atFrame(c *Comm, what string, sig syscall.Signal) {
	if c.Rank() != failingRank() {
		return
	}
	SetOnSend(c, func(sent uint64) {
		if sent == 5 {
			fmt.Fprintf(os.Stderr, "%s myself at %d\n", what, time.Now().UnixNano())
			signalSelf(sig)
		}
	})
}

// killScenario: the failing rank dies of SIGKILL mid-collective.
func killScenario(c *Comm) error {
	atFrame(c, "killing", syscall.SIGKILL)
	return loop(c)
}

// rejoinKillScenario: the job closes its communicator and joins again (as
// bench allreduce does, once per transport) before the kill: the verdict
// must still reach the launcher.
func rejoinKillScenario(c *Comm) error {
	if err := c.Barrier(); err != nil {
		return err
	}
	c.Close()
	env, _ := FromEnv()
	c2, err := Join(context.Background(), env, Options{Transport: c.Transport()})
	if err != nil {
		return err
	}
	defer c2.Close()
	return killScenario(c2)
}

// corruptScenario: the failing rank's 3rd frame is malformed.
func corruptScenario(c *Comm) error {
	if c.Rank() == failingRank() {
		SetCorrupt(c, 3)
	}
	return loop(c)
}

// hangScenario: the failing rank stops (SIGSTOP) mid-collective: alive,
// silent, holding its sockets open.
func hangScenario(c *Comm) error {
	atFrame(c, "stopping", sigStop)
	return loop(c)
}
