package parallel

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// value is rank r's input at element i: magnitudes from 1e-3 to 1e3 and
// both signs, so that the order of a float32 sum changes its bits.
func value(r, i int) float32 {
	h := uint32(r*0x9e3779b1) ^ uint32(i*0x85ebca6b)
	h ^= h >> 15
	h *= 0x2c1b3c6d
	h ^= h >> 12
	m := float64(h%20000)/10000 - 1 // [-1, 1)
	e := float64(int(h>>20)%7) - 3  // 10^-3 .. 10^3
	return float32(m * math.Pow(10, e))
}

func inputs(p, n int) [][]float32 {
	x := make([][]float32, p)
	for r := range x {
		x[r] = make([]float32, n)
		for i := range x[r] {
			x[r][i] = value(r, i)
		}
	}
	return x
}

// ringSum is the single-process math of the ring all-reduce: segment c is
// x[c+1] + x[c+2] + ... + x[c], summed in that order in float32.
func ringSum(x [][]float32) []float32 {
	p, n := len(x), len(x[0])
	out := make([]float32, n)
	for c := range p {
		lo, hi := Segment(n, p, c)
		for i := lo; i < hi; i++ {
			acc := x[(c+1)%p][i]
			for j := 2; j <= p; j++ {
				acc += x[(c+j)%p][i]
			}
			out[i] = acc
		}
	}
	return out
}

// simulate runs every rank's plan in one process, over FIFO links, and
// returns the buffers and the payload bytes each rank sent.
func simulate(t *testing.T, kind Kind, bufs [][]float32, root, chunk int) []int {
	t.Helper()
	p := len(bufs)
	plans := make([]*plan, p)
	for r := range p {
		plans[r] = ringPlan(kind, len(bufs[r]), 4, p, r, root, chunk)
	}
	links := make([][][]byte, p) // links[r]: frames from r to r+1
	si, ri := make([]int, p), make([]int, p)
	sent := make([]int, p)
	for {
		moved, done := false, true
		for r := range p {
			pl, b := plans[r], f32bytes(bufs[r])
			if si[r] < len(pl.sends) && pl.sends[si[r]].after <= ri[r] {
				s := pl.sends[si[r]]
				links[r] = append(links[r], slices.Clone(b[s.off:s.off+s.n]))
				sent[r] += s.n
				si[r]++
				moved = true
			}
			prev := (r + p - 1) % p
			if ri[r] < len(pl.recvs) && len(links[prev]) > 0 {
				x, f := pl.recvs[ri[r]], links[prev][0]
				links[prev] = links[prev][1:]
				if len(f) != x.n {
					t.Fatalf("%s p=%d: rank %d got a frame of %d bytes, want %d", kind, p, r, len(f), x.n)
				}
				if x.reduce {
					addInto(b[x.off:x.off+x.n], f)
				} else {
					copy(b[x.off:], f)
				}
				ri[r]++
				moved = true
			}
			done = done && si[r] == len(pl.sends) && ri[r] == len(pl.recvs)
		}
		if done {
			break
		}
		if !moved {
			t.Fatalf("%s p=%d: the plans deadlock", kind, p)
		}
	}
	for r := range p {
		if len(links[r]) != 0 {
			t.Fatalf("%s p=%d: %d frames from rank %d never received", kind, p, len(links[r]), r)
		}
	}
	return sent
}

func TestRingPlans(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4, 5} {
		for _, n := range []int{0, 1, 3, 17, 1000, 4099} {
			for _, chunk := range []int{64, 1024, 1 << 20} {
				t.Run(fmt.Sprintf("p=%d/n=%d/chunk=%d", p, n, chunk), func(t *testing.T) {
					x := inputs(p, n)
					want := ringSum(x)

					bufs := inputs(p, n)
					sent := simulate(t, AllReduce, bufs, 0, chunk)
					for r := range p {
						if !slices.Equal(bufs[r], want) {
							t.Fatalf("all-reduce: rank %d differs from ringSum", r)
						}
						var model int
						for s := 0; s < p-1; s++ {
							lo, hi := Segment(n, p, ((r-s-1)%p+p)%p)
							lo2, hi2 := Segment(n, p, ((r-s)%p+p)%p)
							model += 4 * (hi - lo + hi2 - lo2)
						}
						if sent[r] != model {
							t.Errorf("all-reduce: rank %d sent %d bytes, want %d", r, sent[r], model)
						}
					}

					bufs = inputs(p, n)
					simulate(t, ReduceScatter, bufs, 0, chunk)
					for r := range p {
						lo, hi := Segment(n, p, r)
						if !slices.Equal(bufs[r][lo:hi], want[lo:hi]) {
							t.Fatalf("reduce-scatter: rank %d's segment differs", r)
						}
					}

					bufs = make([][]float32, p)
					for r := range p {
						bufs[r] = make([]float32, n)
						lo, hi := Segment(n, p, r)
						copy(bufs[r][lo:hi], want[lo:hi])
					}
					simulate(t, AllGather, bufs, 0, chunk)
					for r := range p {
						if !slices.Equal(bufs[r], want) {
							t.Fatalf("all-gather: rank %d differs", r)
						}
					}

					root := p - 1
					bufs = make([][]float32, p)
					for r := range p {
						bufs[r] = make([]float32, n)
					}
					copy(bufs[root], x[root])
					simulate(t, Broadcast, bufs, root, chunk)
					for r := range p {
						if !slices.Equal(bufs[r], x[root]) {
							t.Fatalf("broadcast: rank %d differs from root %d", r, root)
						}
					}
				})
			}
		}
	}
}

// The bitwise checks mean something only if the order of summation
// changes bits: a negative control.
func TestRingOrderMatters(t *testing.T) {
	x := inputs(3, 4096)
	want := ringSum(x)
	differ := 0
	for i := range want {
		if naive := x[0][i] + x[1][i] + x[2][i]; naive != want[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("ringSum equals the naive rank-order sum everywhere: the inputs cannot tell orders apart")
	}
}

func TestSegment(t *testing.T) {
	for _, tc := range []struct{ n, p int }{{0, 1}, {1, 3}, {10, 3}, {10, 4}, {4096, 2}} {
		next := 0
		for i := range tc.p {
			lo, hi := Segment(tc.n, tc.p, i)
			if lo != next || hi < lo || hi-lo > tc.n/tc.p+1 {
				t.Fatalf("Segment(%d, %d, %d) = [%d, %d), want from %d, length ≤ %d", tc.n, tc.p, i, lo, hi, next, tc.n/tc.p+1)
			}
			next = hi
		}
		if next != tc.n {
			t.Fatalf("Segment(%d, %d, ·) covers [0, %d), want [0, %d)", tc.n, tc.p, next, tc.n)
		}
	}
}
