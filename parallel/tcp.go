package parallel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The TCP transport: a ring of links, each a TCP connection carrying
// frames (frame.go) one way, from a rank to the next. Sends run on a
// goroutine of their own while the caller receives, so a frame can be on
// the wire in both directions at once; every frame's header and checksum
// are checked on arrival.

const tcpChunk = 1 << 20 // bytes per frame

type tcpRing struct {
	c          *Comm
	next, prev net.Conn
	nextRank   int
	prevRank   int
	sendSeq    uint32
	recvSeq    uint32
	stage      []byte // header + small payloads, one write
	rhdr       [headerLen]byte
	scratch    []byte // a received frame to be reduced
	mu         sync.Mutex
	aborted    bool

	// corrupt, when > 0, flips a payload bit of the corrupt-th frame sent
	// after its checksum was computed (tests of the receiver's checks).
	corrupt int

	prevRaw syscall.RawConn // for reads that poll before they park
}

// spinReads is how many times a small read polls the socket (a few tens
// of µs) before it parks on Go's network poller: a wake-up through the
// poller costs more than the latency of a small frame.
const spinReads = 100

// readFull fills buf from the previous rank. Small reads poll first.
func (t *tcpRing) readFull(buf []byte, spin bool) error {
	if !spin {
		_, err := io.ReadFull(t.prev, buf)
		return err
	}
	for len(buf) > 0 {
		var n int
		var rerr error
		err := t.prevRaw.Read(func(fd uintptr) bool {
			for i := 0; ; i++ {
				n, rerr = syscall.Read(int(fd), buf)
				if rerr == syscall.EINTR {
					continue
				}
				if rerr != syscall.EAGAIN || i >= spinReads {
					return rerr != syscall.EAGAIN
				}
			}
		})
		switch {
		case err != nil:
			return err
		case rerr != nil:
			return rerr
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		buf = buf[n:]
	}
	return nil
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
	raw, err := t.prev.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.close()
		return nil, err
	}
	t.prevRaw = raw
	return t, nil
}

func (t *tcpRing) name() string      { return "tcp" }
func (t *tcpRing) defaultChunk() int { return tcpChunk }

func (t *tcpRing) abort() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.aborted = true
	past := time.Unix(1, 0)
	for _, conn := range []net.Conn{t.next, t.prev} {
		if conn != nil {
			conn.SetDeadline(past)
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

// inlineSendBytes bounds the frames a collective may send from the
// receiving goroutine: far below what the socket buffers hold (4 MiB
// asked for each way), so such sends never block, and a small
// collective needs no second goroutine (whose wake-up would cost more
// than the collective).
const inlineSendBytes = 256 << 10

func (t *tcpRing) run(o *op, pl *plan) error {
	if pl.sendBytes() <= inlineSendBytes {
		return t.runInline(o, pl)
	}
	recvd := make(chan struct{}, len(pl.recvs))
	stop := make(chan struct{})
	sendErr := make(chan error, 1)
	if len(pl.sends) > 0 {
		go func() { sendErr <- t.sendAll(o, pl, recvd, stop) }()
	} else {
		sendErr <- nil
	}
	err := t.recvAll(o, pl, recvd)
	if err != nil {
		close(stop)
		t.abort() // a blocked write returns
	}
	if serr := <-sendErr; err == nil {
		err = serr
	}
	return err
}

// runInline sends each frame as soon as the receives it waits for are in.
func (t *tcpRing) runInline(o *op, pl *plan) error {
	si := 0
	for ri := 0; ; ri++ {
		for si < len(pl.sends) && pl.sends[si].after <= ri {
			if err := t.send(o, &pl.sends[si]); err != nil {
				return err
			}
			si++
		}
		if ri == len(pl.recvs) {
			return nil
		}
		if err := t.recv(o, &pl.recvs[ri]); err != nil {
			return err
		}
	}
}

func (t *tcpRing) sendAll(o *op, pl *plan, recvd <-chan struct{}, stop <-chan struct{}) error {
	done := 0
	for i := range pl.sends {
		for done < pl.sends[i].after {
			select {
			case <-recvd:
				done++
			case <-stop:
				return nil
			}
		}
		if err := t.send(o, &pl.sends[i]); err != nil {
			return err
		}
	}
	return nil
}

// send writes one frame to the next rank.
func (t *tcpRing) send(o *op, s *xfer) error {
	c := t.c
	payload := o.buf[s.off : s.off+s.n]
	h := header{kind: uint8(o.kind), length: uint32(s.n), seq: t.sendSeq, coll: o.coll}
	t.next.SetWriteDeadline(time.Now().Add(c.deadline))
	bad := t.corruptNext() && s.n > 0
	var err error
	if s.n <= 64<<10 {
		t.stage = append(t.stage[:0], make([]byte, headerLen)...)
		t.stage = append(t.stage, payload...)
		putHeader(t.stage, h, t.stage[headerLen:])
		if bad {
			t.stage[headerLen+s.n/2] ^= 0x10
		}
		_, err = t.next.Write(t.stage)
	} else {
		var hdr [headerLen]byte
		putHeader(hdr[:], h, payload)
		if bad {
			payload[s.n/2] ^= 0x10
		}
		bufs := net.Buffers{hdr[:], payload}
		_, err = bufs.WriteTo(t.next)
		if bad {
			payload[s.n/2] ^= 0x10 // the caller's data is left as it was
		}
	}
	if err != nil {
		return t.linkErr(o, t.nextRank, "sending to it", err)
	}
	t.sendSeq++
	c.count.addSent(o.kind, s.n, headerLen)
	if c.onSend != nil {
		c.onSend(uint64(t.sendSeq))
	}
	return nil
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

func (t *tcpRing) recvAll(o *op, pl *plan, recvd chan<- struct{}) error {
	for i := range pl.recvs {
		if err := t.recv(o, &pl.recvs[i]); err != nil {
			return err
		}
		recvd <- struct{}{}
	}
	return nil
}

// recv reads one frame from the previous rank, checks it, and copies or
// adds it into the buffer.
func (t *tcpRing) recv(o *op, r *xfer) error {
	c := t.c
	t.prev.SetReadDeadline(time.Now().Add(c.deadline))
	if err := t.readFull(t.rhdr[:], true); err != nil {
		return t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	h, sum, err := parseHeader(t.rhdr[:])
	if err == nil {
		err = h.expect(header{kind: uint8(o.kind), length: uint32(r.n), seq: t.recvSeq, coll: o.coll})
	}
	if err != nil {
		return t.malformed(o, err)
	}
	dst := o.buf[r.off : r.off+r.n]
	in := dst
	if r.reduce {
		if cap(t.scratch) < r.n {
			t.scratch = make([]byte, r.n)
		}
		in = t.scratch[:r.n]
	}
	if err := t.readFull(in, r.n <= 64<<10); err != nil {
		return t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	if err := checkCRC(t.rhdr[:], in, sum); err != nil {
		return t.malformed(o, err)
	}
	if r.reduce {
		addInto(dst, in)
	}
	t.recvSeq++
	c.count.addRecv(o.kind, r.n, headerLen)
	return nil
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
	case errors.Is(err, os.ErrDeadlineExceeded):
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
