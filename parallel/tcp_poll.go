package parallel

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// The TCP engine: one goroutine drives both links of a rank without
// blocking, as the shared-memory engine does: it writes what it may of
// the frame being sent (writev of header and payload, straight from the
// caller's buffer), reads what has arrived of the frame being received
// (readv into header and destination), and when neither moved it backs
// off (spin, yield, nap). No goroutine hand-off, no poller wake-up on the
// path of a frame; frames flow both ways at once.

// frameOut is the frame being written to the next rank.
type frameOut struct {
	active bool
	hdr    [headerLen]byte
	pay    []byte
	off    int // bytes of header+payload written
}

// frameIn is the frame being read from the previous rank.
type frameIn struct {
	active  bool
	checked bool // header read and checked
	in      []byte
	off     int
}

func (t *tcpRing) runPoll(o *op, pl *plan) error {
	c := t.c
	var out frameOut
	var in frameIn
	si, ri := 0, 0
	var w backoff
	for si < len(pl.sends) || ri < len(pl.recvs) {
		moved := false
		if si < len(pl.sends) && (out.active || pl.sends[si].after <= ri) {
			if !out.active {
				t.startSend(o, &pl.sends[si], &out)
			}
			n, err := t.push(&out)
			if err != nil {
				return t.linkErr(o, t.nextRank, "sending to it", err)
			}
			moved = n > 0
			if out.off == headerLen+len(out.pay) {
				out.active = false
				si++
				t.sendSeq++
				c.count.addSent(o.kind, pl.sends[si-1].n, headerLen)
				if c.onSend != nil {
					c.onSend(uint64(t.sendSeq))
				}
			}
		}
		if ri < len(pl.recvs) {
			r := &pl.recvs[ri]
			if !in.active {
				in = frameIn{active: true, in: o.buf[r.off : r.off+r.n]}
				if r.reduce {
					if cap(t.scratch) < r.n {
						t.scratch = make([]byte, r.n)
					}
					in.in = t.scratch[:r.n]
				}
			}
			n, err := t.pull(&in)
			if err != nil {
				return t.linkErr(o, t.prevRank, "receiving from it", err)
			}
			moved = moved || n > 0
			if !in.checked && in.off >= headerLen {
				h, _, err := parseHeader(t.rhdr[:])
				if err == nil {
					err = h.expect(header{kind: uint8(o.kind), length: uint32(r.n), seq: t.recvSeq, coll: o.coll})
				}
				if err != nil {
					return t.malformed(o, err)
				}
				in.checked = true
			}
			if in.off == headerLen+r.n {
				_, sum, _ := parseHeader(t.rhdr[:])
				if err := checkCRC(t.rhdr[:], in.in, sum); err != nil {
					return t.malformed(o, err)
				}
				if r.reduce {
					addInto(o.buf[r.off:r.off+r.n], in.in)
				}
				in.active = false
				ri++
				t.recvSeq++
				c.count.addRecv(o.kind, r.n, headerLen)
			}
		}
		if moved {
			w.n = 0
			continue
		}
		if err := w.wait(c); err != nil {
			return err
		}
		if w.expired {
			blame, doing := t.prevRank, "receiving from it"
			if ri == len(pl.recvs) {
				blame, doing = t.nextRank, "sending to it (its socket stayed full)"
			}
			return t.linkErr(o, blame, doing, errNoProgress)
		}
	}
	return nil
}

// errNoProgress: a link moved nothing for a whole deadline.
var errNoProgress = errors.New("no progress")

func (t *tcpRing) startSend(o *op, s *xfer, out *frameOut) {
	*out = frameOut{active: true, pay: o.buf[s.off : s.off+s.n]}
	putHeader(out.hdr[:], header{kind: uint8(o.kind), length: uint32(s.n), seq: t.sendSeq, coll: o.coll}, out.pay)
	if t.corruptNext() && s.n > 0 {
		// Damage a copy after the checksum: the caller's data stays intact.
		t.stage = append(t.stage[:0], out.pay...)
		t.stage[s.n/2] ^= 0x10
		out.pay = t.stage
	}
}

// push writes what the socket takes of the frame; n is the bytes written.
func (t *tcpRing) push(out *frameOut) (int, error) {
	iov := frameIOV(out.hdr[:], out.pay, out.off)
	if len(iov) == 0 {
		return 0, nil
	}
	n, _, err := nonBlocking(func() (int, error) { return unix.Writev(t.nextFD, iov) })
	out.off += n
	return n, err
}

// pull reads what has arrived of the frame; n is the bytes read.
func (t *tcpRing) pull(in *frameIn) (int, error) {
	iov := frameIOV(t.rhdr[:], in.in, in.off)
	n, ok, err := nonBlocking(func() (int, error) { return unix.Readv(t.prevFD, iov) })
	if ok && n == 0 {
		return 0, io.ErrUnexpectedEOF // the peer closed its end
	}
	in.off += n
	return n, err
}

// frameIOV is what is left of a frame after off bytes: the rest of its
// header, the rest of its payload.
func frameIOV(hdr, pay []byte, off int) [][]byte {
	iov := make([][]byte, 0, 2)
	if off < len(hdr) {
		iov = append(iov, hdr[off:])
	}
	if p := pay[max(0, off-len(hdr)):]; len(p) > 0 {
		iov = append(iov, p)
	}
	return iov
}

// nonBlocking runs a read or write on a non-blocking descriptor,
// retrying EINTR; ok is false when it had nothing to give or take now
// (EAGAIN).
func nonBlocking(f func() (int, error)) (n int, ok bool, err error) {
	for {
		n, err := f()
		switch err {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return 0, false, nil
		case nil:
			return n, true, nil
		}
		return 0, false, err
	}
}

// fdOf is a connection's descriptor (non-blocking, as Go's poller keeps
// it). The ring owns its connections: they close only in close().
func fdOf(conn net.Conn) (int, error) {
	rc, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("tcp link: %w", err)
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1, fmt.Errorf("tcp link: %w", err)
	}
	return fd, nil
}
