package parallel

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"
)

// The blocking TCP engine, for systems where the polling one cannot run
// (Windows: Go's sockets there are not descriptors to readv and writev).
// A goroutine sends the plan's frames, each one once the receives it
// depends on are done, while the calling goroutine receives; each side
// blocks in Go's own reads and writes, bounded by the deadline. A verdict
// unblocks both (abort sets the links' deadlines in the past). The frames
// on the wire, their checks and the byte counts are the polling engine's.

func (t *tcpRing) runBlocking(o *op, pl *plan) error {
	recvd := make(chan struct{}, len(pl.recvs)) // one token per frame received
	quit := make(chan struct{})                 // closed when receiving failed
	var sendErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got := 0
		for i := range pl.sends {
			for got < pl.sends[i].after {
				select {
				case <-recvd:
					got++
				case <-quit:
					return
				}
			}
			if sendErr = t.sendFrame(o, &pl.sends[i]); sendErr != nil {
				return
			}
		}
	}()
	var recvErr error
	for i := range pl.recvs {
		if recvErr = t.recvFrame(o, &pl.recvs[i]); recvErr != nil {
			break
		}
		recvd <- struct{}{}
	}
	if recvErr != nil {
		close(quit)
		t.next.SetWriteDeadline(time.Unix(1, 0)) // the job failed: stop sending
	}
	wg.Wait()
	if recvErr != nil {
		return recvErr
	}
	return sendErr
}

// sendFrame writes one frame to the next rank.
func (t *tcpRing) sendFrame(o *op, s *xfer) error {
	c := t.c
	var out frameOut
	t.startSend(o, s, &out)
	if !out.sealed {
		out.sum = crcUpdate(out.sum, out.pay)
		binary.LittleEndian.PutUint32(out.trl[:], out.sum)
	}
	t.next.SetWriteDeadline(time.Now().Add(c.deadline))
	bufs := net.Buffers{out.hdr[:], out.pay, out.trl[:]}
	if _, err := bufs.WriteTo(t.next); err != nil {
		return t.linkErr(o, t.nextRank, "sending to it", err)
	}
	t.sendSeq++
	c.count.addSent(o.kind, len(out.pay), framing)
	if c.onSend != nil {
		c.onSend(uint64(t.sendSeq))
	}
	return nil
}

// recvFrame reads one frame from the previous rank, checks its header and
// checksum, and stores or adds its payload.
func (t *tcpRing) recvFrame(o *op, r *xfer) error {
	c := t.c
	dst := o.buf[r.off : r.off+r.n]
	in := dst
	if r.reduce {
		if cap(t.scratch) < r.n {
			t.scratch = make([]byte, r.n)
		}
		in = t.scratch[:r.n]
	}
	t.prev.SetReadDeadline(time.Now().Add(c.deadline))
	if _, err := io.ReadFull(t.prev, t.rhdr[:]); err != nil {
		return t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	h, err := parseHeader(t.rhdr[:])
	if err == nil {
		err = h.expect(header{kind: uint8(o.kind), length: uint32(r.n), seq: t.recvSeq, coll: o.coll})
	}
	if err != nil {
		return t.malformed(o, err)
	}
	if _, err := io.ReadFull(t.prev, in); err != nil {
		return t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	if _, err := io.ReadFull(t.prev, t.rtrl[:]); err != nil {
		return t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	if err := checkCRC(crcUpdate(crcUpdate(0, t.rhdr[:]), in), t.rtrl[:], r.n); err != nil {
		return t.malformed(o, err)
	}
	if r.reduce {
		addInto(dst, in)
	}
	t.recvSeq++
	c.count.addRecv(o.kind, r.n, framing)
	return nil
}
