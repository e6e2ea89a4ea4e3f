package parallel

// The ring schedules. A rank's part of a collective is a plan: the frames
// it sends to the next rank and the frames it receives from the previous
// one, each a byte range of the collective's buffer, in the order they go
// over the link. A send may wait for receives (it forwards what they
// brought); nothing else orders them, so a transport can keep several
// frames in flight: that is the pipelining. Plans are pure functions of
// (collective, size, ranks, rank, root, chunk), identical for sender and
// receiver, so each side knows exactly which frame comes next.

// Segment returns the elements [lo, hi) of an n-element buffer that rank i
// of p owns in reduce-scatter and all-gather: contiguous ranges in rank
// order, the first n%p of them one element longer.
func Segment(n, p, i int) (lo, hi int) {
	q, r := n/p, n%p
	lo = i*q + min(i, r)
	hi = lo + q
	if i < r {
		hi++
	}
	return lo, hi
}

// xfer is one frame of a plan.
type xfer struct {
	off, n int // byte range of the buffer
	// after (sends only): how many of the plan's receives must be complete
	// before this frame may be sent.
	after int
	// reduce (receives only): add the payload into the buffer as float32
	// (buffer = received + buffer) instead of copying it.
	reduce bool
}

type plan struct {
	sends, recvs []xfer
}

// frames cuts the byte range [lo, hi) into frames of at most chunk bytes.
func frames(lo, hi, chunk int) [][2]int {
	var out [][2]int
	for a := lo; a < hi; a += chunk {
		out = append(out, [2]int{a, min(a+chunk, hi)})
	}
	return out
}

// ringPlan is rank's plan for a collective on n elements of elem bytes
// over p ranks (root matters only to Broadcast); chunk (bytes, a multiple
// of elem) bounds a frame.
//
// Reduce-scatter, step s = 0..p-2: send segment rank-s-1, receive segment
// rank-s-2 and add it in (mod p). After p-1 steps rank r holds the sum of
// segment r, accumulated along the ring from rank r+1: a fixed order.
// All-gather, step s: send segment rank-s, receive segment rank-s-1 and
// copy it. All-reduce is the one, then the other; the first frames of its
// all-gather wait only for the frames of the same segment's last reduction.
func ringPlan(kind Kind, n, elem, p, rank, root, chunk int) *plan {
	pl := &plan{}
	if p == 1 {
		return pl
	}
	mod := func(i int) int { return ((i % p) + p) % p }
	seg := func(i int) [][2]int {
		lo, hi := Segment(n, p, mod(i))
		return frames(lo*elem, hi*elem, chunk)
	}
	// prev[j] is the receive count after frame j of the segment received
	// in the previous step: the segment this step forwards.
	var prev []int
	step := func(send, recv [][2]int, first bool, reduce bool) {
		for j, f := range send {
			after := 0
			if !first {
				after = prev[j]
			}
			pl.sends = append(pl.sends, xfer{off: f[0], n: f[1] - f[0], after: after})
		}
		prev = prev[:0:0]
		for _, f := range recv {
			pl.recvs = append(pl.recvs, xfer{off: f[0], n: f[1] - f[0], reduce: reduce})
			prev = append(prev, len(pl.recvs))
		}
	}
	switch kind {
	case AllReduce, ReduceScatter:
		for s := 0; s < p-1; s++ {
			step(seg(rank-s-1), seg(rank-s-2), s == 0, true)
		}
		if kind == ReduceScatter {
			break
		}
		for s := 0; s < p-1; s++ {
			step(seg(rank-s), seg(rank-s-1), false, false)
		}
	case AllGather:
		for s := 0; s < p-1; s++ {
			step(seg(rank-s), seg(rank-s-1), s == 0, false)
		}
	case Barrier:
		// p-1 empty frames along the ring, each forwarded once received:
		// the last arrives only after every rank has entered.
		for s := 0; s < p-1; s++ {
			step([][2]int{{0, 0}}, [][2]int{{0, 0}}, s == 0, false)
		}
	case Broadcast:
		d := mod(rank - root) // distance from the root along the ring
		all := frames(0, n*elem, chunk)
		if d > 0 {
			for _, f := range all {
				pl.recvs = append(pl.recvs, xfer{off: f[0], n: f[1] - f[0]})
			}
		}
		if d < p-1 {
			for j, f := range all {
				after := 0
				if d > 0 {
					after = j + 1
				}
				pl.sends = append(pl.sends, xfer{off: f[0], n: f[1] - f[0], after: after})
			}
		}
	}
	return pl
}
