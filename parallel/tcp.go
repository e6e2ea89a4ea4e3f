package parallel

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// The TCP transport: a ring of links, each a TCP connection carrying
// frames (frame.go) one way, from a rank to the next, driven without
// blocking by one goroutine on Unix (tcp_poll.go), or on Windows by a
// sending goroutine beside a receiving one, each blocking in Go's own
// reads and writes (tcp_block.go); every frame's header and checksum are
// checked on arrival.

const tcpChunk = 1 << 20 // bytes per frame

// wholeCRCBytes: frames up to this size get their checksum before the
// first write, so header, payload and trailer go out in one writev;
// larger ones are summed piece by piece as the socket takes them.
const wholeCRCBytes = 64 << 10

type tcpRing struct {
	c          *Comm
	next, prev net.Conn
	nextRank   int
	prevRank   int
	sendSeq    uint32
	recvSeq    uint32
	stage      []byte // a damaged copy of a payload (tests)
	rhdr       [headerLen]byte
	rtrl       [trailerLen]byte
	scratch    []byte // a received frame to be reduced

	// corrupt, when > 0, flips a payload bit of the corrupt-th frame sent
	// after its checksum was computed (tests of the receiver's checks).
	corrupt int

	//lint:ignore U1000 the polling engine's (tcp_poll.go, Unix only); Windows runs the blocking one
	nextFD, prevFD int  // the links' descriptors (non-blocking; the polling engine)
	blocking       bool // run with the blocking engine (tcp_block.go)
}

func (c *Comm) setupTCP(ctx context.Context, p peersMsg, ln net.Listener) (transport, error) {
	t := &tcpRing{c: c, nextRank: (c.rank + 1) % c.size, prevRank: (c.rank + c.size - 1) % c.size}
	var wg sync.WaitGroup
	var dialErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := dialRetry(ctx, p.Data[t.nextRank])
		if err != nil {
			dialErr = fmt.Errorf("link to rank %d at %s: %w", t.nextRank, p.Data[t.nextRank], err)
			return
		}
		cc := &ctlConn{conn: conn}
		if err := cc.sendJSON(ctlLink, linkHello{p.Job, c.rank}, c.deadline); err != nil {
			conn.Close()
			dialErr = fmt.Errorf("link to rank %d: %w", t.nextRank, err)
			return
		}
		t.next = conn
	}()
	var acceptErr error
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	for t.prev == nil && acceptErr == nil {
		conn, err := ln.Accept()
		if err != nil {
			acceptErr = fmt.Errorf("link from rank %d: %w", t.prevRank, err)
			break
		}
		var h linkHello
		cc := &ctlConn{conn: conn}
		if err := cc.expectKind(ctlLink, c.deadline, &h); err != nil || h.Job != p.Job || h.Rank != t.prevRank {
			conn.Close() // not our neighbour
			continue
		}
		t.prev = conn
	}
	stop()
	wg.Wait()
	if err := errors.Join(dialErr, acceptErr); err != nil {
		t.close()
		return nil, err
	}
	for _, conn := range []net.Conn{t.next, t.prev} {
		tc := conn.(*net.TCPConn)
		tc.SetNoDelay(true)
		tc.SetReadBuffer(4 << 20)
		tc.SetWriteBuffer(4 << 20)
		tc.SetDeadline(time.Time{})
	}
	if err := t.prepare(); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *tcpRing) name() string      { return "tcp" }
func (t *tcpRing) defaultChunk() int { return tcpChunk }

// abort unblocks the blocking engine's reads and writes (the polling
// engine polls the verdict).
func (t *tcpRing) abort() {
	if t.blocking {
		for _, conn := range []net.Conn{t.next, t.prev} {
			conn.SetDeadline(time.Unix(1, 0))
		}
	}
}

func (t *tcpRing) close() error {
	var errs []error
	for _, conn := range []net.Conn{t.next, t.prev} {
		if conn != nil {
			errs = append(errs, conn.Close())
		}
	}
	return errors.Join(errs...)
}

// corruptNext counts down the test's corruption: true for the frame whose
// payload is to be damaged after its checksum was computed.
func (t *tcpRing) corruptNext() bool {
	if t.corrupt == 0 {
		return false
	}
	t.corrupt--
	return t.corrupt == 0
}

func (t *tcpRing) run(o *op, pl *plan) error {
	if t.blocking {
		return t.runBlocking(o, pl)
	}
	return t.runPoll(o, pl)
}

func (t *tcpRing) malformed(o *op, err error) error {
	return t.c.fail(&Error{Rank: t.prevRank, Err: ErrMalformed, coll: int64(o.coll),
		Detail: fmt.Sprintf("%v (frame %d, %s)", unwrapMalformed(err), t.recvSeq, t.c.where(o))})
}

// linkErr turns a failed read or write on the link to rank q into the
// job's verdict.
func (t *tcpRing) linkErr(o *op, q int, doing string, err error) error {
	c := t.c
	if v := c.failed(); v != nil {
		return v
	}
	e := &Error{Rank: q, coll: int64(o.coll)}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, errNoProgress):
		e.Err = ErrDeadline
		e.Detail = fmt.Sprintf("nothing for %v while %s (%s)", c.deadline, doing, c.where(o))
	case c.ctl != nil && c.ctl.bye[q].Load():
		e.Err = ErrLeft
		e.Detail = c.where(o)
	default:
		e.Err = ErrPeerLost
		e.Detail = fmt.Sprintf("its link closed while %s (%s: %v)", doing, c.where(o), err)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			e.Detail = fmt.Sprintf("its link closed while %s (%s)", doing, c.where(o))
		}
	}
	return c.fail(e)
}

// unwrapMalformed drops the sentinel's own text from a check's message.
func unwrapMalformed(err error) string {
	s := err.Error()
	p := ErrMalformed.Error() + ": "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// frameOut is the frame being written to the next rank.
type frameOut struct {
	active bool
	hdr    [headerLen]byte
	pay    []byte
	trl    [trailerLen]byte
	sum    uint32 // checksum of what was written, or of it all once sealed
	sealed bool   // the trailer holds the checksum
}

// errNoProgress: a link moved nothing for a whole deadline.
var errNoProgress = errors.New("no progress")

// startSend puts a frame in out: its header, the caller's payload, and
// the checksum when it can be computed up front.
func (t *tcpRing) startSend(o *op, s *xfer, out *frameOut) {
	*out = frameOut{active: true, pay: o.buf[s.off : s.off+s.n]}
	putHeader(out.hdr[:], header{kind: uint8(o.kind), length: uint32(s.n), seq: t.sendSeq, coll: o.coll})
	out.sum = crcUpdate(0, out.hdr[:])
	bad := t.corruptNext() && s.n > 0
	if s.n <= wholeCRCBytes || bad {
		out.sum = crcUpdate(out.sum, out.pay)
		binary.LittleEndian.PutUint32(out.trl[:], out.sum)
		out.sealed = true
	}
	if bad {
		// Damage a copy after the checksum: the caller's data stays intact.
		t.stage = append(t.stage[:0], out.pay...)
		t.stage[s.n/2] ^= 0x10
		out.pay = t.stage
	}
}
