package parallel

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// The shared-memory transport, for ranks on one host. Each rank owns one
// ring: a file in /dev/shm (on macOS, which has none, in the temporary
// directory: shmDir) that it creates and its next rank maps, so the
// ring carries frames one way (single producer, single consumer), as the
// TCP links do. The file is unlinked as soon as both sides have mapped
// it: nothing is left behind once the job is set up, even if a process
// is killed later. Windows has no such transport (ErrUnsupported).
//
// Layout of a ring file:
//
//	0     magic, slot count, slot payload bytes (uint64 each)
//	64    head: frames written (the producer's atomic counter)
//	128   tail: frames consumed (the consumer's atomic counter)
//	4096  slots: 64-byte header (length, sequence, collective, kind as
//	      uint32) then the payload
//
// The producer fills slot head%slots and then stores head+1; the consumer
// reads it once it loads head > tail, then stores tail+1. Those atomic
// stores and loads (sync/atomic on the mapped words) order the plain
// reads and writes of the slots. A waiting side spins, then yields the
// CPU, then sleeps, checking the deadline and the job's verdict.

const (
	shmMagic      = 0x67726261_6c747067 // "gptlabrg"
	shmSlots      = 8
	shmSlotBytes  = 256 << 10
	shmRingHeader = 4096
	shmSlotHeader = 64
)

type ring struct {
	mem        []byte
	head, tail *atomic.Uint64
	path       string // the file while it is still linked
}

// unlink removes the ring's file, if it is still linked.
func (r *ring) unlink() {
	if r != nil && r.path != "" {
		os.Remove(r.path)
		r.path = ""
	}
}

func (r *ring) slot(i uint64) []byte {
	off := shmRingHeader + int(i%shmSlots)*(shmSlotHeader+shmSlotBytes)
	return r.mem[off : off+shmSlotHeader+shmSlotBytes]
}

// ShmPath is the file of rank's ring in a job (it exists only while the
// job is being set up), in shmDir: /dev/shm, or the temporary directory
// where there is no /dev/shm (macOS).
func ShmPath(job string, rank int) string {
	return filepath.Join(shmDir(), fmt.Sprintf("gptlab-%s-%d.ring", job, rank))
}

type shmRing struct {
	c                  *Comm
	out, in            *ring
	sent, taken        uint64 // local copies of out.head and in.tail
	nextRank, prevRank int
	corrupt            int // tests: damage the length of the corrupt-th frame sent
}

func (c *Comm) setupShm(p peersMsg) (transport, error) {
	s := &shmRing{c: c, nextRank: (c.rank + 1) % c.size, prevRank: (c.rank + c.size - 1) % c.size}
	var err error
	var mine readyMsg
	if s.out, err = mapRing(ShmPath(p.Job, c.rank), true); err != nil {
		mine.Err = err.Error()
	}
	if err := c.exchange(mine); err != nil {
		s.close()
		return nil, err
	}
	if s.in, err = mapRing(ShmPath(p.Job, s.prevRank), false); err != nil {
		mine.Err = err.Error()
	}
	if err := c.exchange(mine); err != nil {
		s.close()
		return nil, err
	}
	s.out.unlink() // both sides have it mapped
	return s, nil
}

func (s *shmRing) name() string      { return "shm" }
func (s *shmRing) defaultChunk() int { return shmSlotBytes }
func (s *shmRing) abort()            {} // waits poll the verdict
func (s *shmRing) close() error {
	s.out.unmap()
	s.in.unmap()
	return nil
}

func (s *shmRing) run(o *op, pl *plan) error {
	si, ri := 0, 0
	var w backoff
	for si < len(pl.sends) || ri < len(pl.recvs) {
		moved := false
		if si < len(pl.sends) && pl.sends[si].after <= ri && s.sent-s.out.tail.Load() < shmSlots {
			s.put(o, &pl.sends[si])
			si++
			moved = true
		}
		if ri < len(pl.recvs) && s.in.head.Load() > s.taken {
			if err := s.take(o, &pl.recvs[ri]); err != nil {
				return err
			}
			ri++
			moved = true
		}
		if moved {
			w.n = 0
			continue
		}
		if err := w.wait(s.c); err != nil {
			return err
		}
		if w.expired {
			blame, doing := s.prevRank, "receiving from it"
			if ri == len(pl.recvs) || s.in.head.Load() > s.taken {
				blame, doing = s.nextRank, "sending to it (its ring stayed full)"
			}
			return s.c.fail(&Error{Rank: blame, Err: ErrDeadline, coll: int64(o.coll),
				Detail: fmt.Sprintf("nothing for %v while %s (%s)", s.c.deadline, doing, s.c.where(o))})
		}
	}
	return nil
}

func (s *shmRing) put(o *op, x *xfer) {
	sl := s.out.slot(s.sent)
	n := uint32(x.n)
	if s.corrupt > 0 {
		if s.corrupt--; s.corrupt == 0 {
			n++
		}
	}
	binary.LittleEndian.PutUint32(sl[0:], n)
	binary.LittleEndian.PutUint32(sl[4:], uint32(s.sent))
	binary.LittleEndian.PutUint32(sl[8:], o.coll)
	binary.LittleEndian.PutUint32(sl[12:], uint32(o.kind))
	copy(sl[shmSlotHeader:], o.buf[x.off:x.off+x.n])
	s.sent++
	s.out.head.Store(s.sent)
	s.c.count.addSent(o.kind, x.n, shmSlotHeader)
	if s.c.onSend != nil {
		s.c.onSend(s.sent)
	}
}

func (s *shmRing) take(o *op, x *xfer) error {
	sl := s.in.slot(s.taken)
	h := header{
		length: binary.LittleEndian.Uint32(sl[0:]),
		seq:    binary.LittleEndian.Uint32(sl[4:]),
		coll:   binary.LittleEndian.Uint32(sl[8:]),
		kind:   uint8(binary.LittleEndian.Uint32(sl[12:])),
	}
	if err := h.expect(header{kind: uint8(o.kind), length: uint32(x.n), seq: uint32(s.taken), coll: o.coll}); err != nil {
		return s.c.fail(&Error{Rank: s.prevRank, Err: ErrMalformed, coll: int64(o.coll),
			Detail: fmt.Sprintf("%s (frame %d, %s)", unwrapMalformed(err), s.taken, s.c.where(o))})
	}
	dst, src := o.buf[x.off:x.off+x.n], sl[shmSlotHeader:shmSlotHeader+x.n]
	if x.reduce {
		addInto(dst, src)
	} else {
		copy(dst, src)
	}
	s.taken++
	s.in.tail.Store(s.taken)
	s.c.count.addRecv(o.kind, x.n, shmSlotHeader)
	return nil
}

// spinFor is how long a wait polls before it naps: longer than a time
// slice of the scheduler, so a rank waiting on a descheduled peer keeps
// its CPU (as MPI's busy polling does) instead of handing it to another
// process.
const spinFor = 20 * time.Millisecond

// backoff paces a polling wait: spin for spinFor (the latency path), then
// sleep in 50 µs naps until the deadline. It never calls
// sched_yield: on a busy machine that hands the CPU to another process
// for a whole time slice (measured: a 4 KiB all-reduce went from 2 µs to
// over 100 µs beside a CPU-bound process).
type backoff struct {
	n       int
	since   time.Time
	expired bool
}

func (b *backoff) wait(c *Comm) error {
	if v := c.failed(); v != nil {
		return v
	}
	b.n++
	if b.n == 1 {
		b.since = time.Now()
		b.expired = false
		return nil
	}
	if b.n < 256 {
		return nil
	}
	el := time.Since(b.since)
	switch {
	case el > c.deadline:
		b.expired = true
	case el < spinFor:
	default:
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}
