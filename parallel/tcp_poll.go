//go:build unix

package parallel

import (
	"encoding/binary"
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

// blockingTCP makes every link use the blocking engine, as on Windows
// (tests set it to run that engine on Unix).
var blockingTCP = false

// pollOut is the frame being written to the next rank, and how much of it
// has been written.
type pollOut struct {
	frameOut
	off int // bytes of the frame written
}

// frameIn is the frame being read from the previous rank.
type frameIn struct {
	active  bool
	checked bool // header read and checked
	in      []byte
	dst     []byte // where a reduced frame is added (nil: in is the destination)
	off     int    // bytes of the frame read
	added   int    // payload bytes already added into dst
	sum     uint32 // checksum of what was read
}

func (t *tcpRing) runPoll(o *op, pl *plan) error {
	c := t.c
	var out pollOut
	var in frameIn
	si, ri := 0, 0
	var w backoff
	for si < len(pl.sends) || ri < len(pl.recvs) {
		moved := false
		if si < len(pl.sends) && (out.active || pl.sends[si].after <= ri) {
			if !out.active {
				t.startSend(o, &pl.sends[si], &out.frameOut)
				out.off = 0
			}
			n, err := t.push(&out)
			if err != nil {
				return t.linkErr(o, t.nextRank, "sending to it", err)
			}
			moved = n > 0
			if out.off == headerLen+len(out.pay)+trailerLen {
				out.active = false
				si++
				t.sendSeq++
				c.count.addSent(o.kind, len(out.pay), framing)
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
					in.in, in.dst = t.scratch[:r.n], in.in
				}
			}
			n, err := t.pull(o, &in)
			if err != nil {
				return err
			}
			moved = moved || n > 0
			if in.off == headerLen+r.n+trailerLen {
				if err := checkCRC(in.sum, t.rtrl[:], r.n); err != nil {
					return t.malformed(o, err)
				}
				in.active = false
				ri++
				t.recvSeq++
				c.count.addRecv(o.kind, r.n, framing)
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

// push writes what the socket takes of the frame; n is the bytes written.
func (t *tcpRing) push(out *pollOut) (int, error) {
	trl := out.trl[:0]
	if out.sealed {
		trl = out.trl[:]
	}
	iov := frameIOV(out.hdr[:], out.pay, trl, out.off)
	if len(iov) == 0 {
		return 0, nil
	}
	before := out.off
	n, _, err := nonBlocking(func() (int, error) { return unix.Writev(t.nextFD, iov) })
	out.off += n
	if !out.sealed {
		lo, hi := payloadSpan(before, out.off, len(out.pay))
		out.sum = crcUpdate(out.sum, out.pay[lo:hi])
		if hi == len(out.pay) {
			binary.LittleEndian.PutUint32(out.trl[:], out.sum)
			out.sealed = true
		}
	}
	return n, err
}

// pull reads what has arrived of the frame, checking its header once it is
// in and summing (and adding in, for a reduction) the payload as it comes.
func (t *tcpRing) pull(o *op, in *frameIn) (int, error) {
	iov := frameIOV(t.rhdr[:], in.in, t.rtrl[:], in.off)
	before := in.off
	n, ok, err := nonBlocking(func() (int, error) { return unix.Readv(t.prevFD, iov) })
	if err == nil && ok && n == 0 {
		err = io.ErrUnexpectedEOF // the peer closed its end
	}
	if err != nil {
		return 0, t.linkErr(o, t.prevRank, "receiving from it", err)
	}
	in.off += n
	if !in.checked && in.off >= headerLen {
		h, err := parseHeader(t.rhdr[:])
		if err == nil {
			err = h.expect(header{kind: uint8(o.kind), length: uint32(len(in.in)), seq: t.recvSeq, coll: o.coll})
		}
		if err != nil {
			return 0, t.malformed(o, err)
		}
		in.checked = true
		in.sum = crcUpdate(0, t.rhdr[:])
	}
	lo, hi := payloadSpan(before, in.off, len(in.in))
	in.sum = crcUpdate(in.sum, in.in[lo:hi])
	if in.dst != nil {
		if end := hi &^ 3; end > in.added {
			addInto(in.dst[in.added:end], in.in[in.added:end])
			in.added = end
		}
	}
	return n, nil
}

// payloadSpan is the part of the payload that frame bytes [from, to) hold.
func payloadSpan(from, to, n int) (lo, hi int) {
	lo = min(max(from-headerLen, 0), n)
	hi = min(max(to-headerLen, 0), n)
	return lo, hi
}

// frameIOV is what is left of a frame after off bytes: the rest of its
// header, of its payload, of its trailer.
func frameIOV(hdr, pay, trl []byte, off int) [][]byte {
	iov := make([][]byte, 0, 3)
	for _, part := range [][]byte{hdr, pay, trl} {
		if off < len(part) {
			iov = append(iov, part[off:])
			off = 0
		} else {
			off -= len(part)
		}
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

// prepare finds the links' descriptors for the polling engine, unless
// the blocking one is asked for.
func (t *tcpRing) prepare() error {
	if t.blocking = blockingTCP; t.blocking {
		return nil
	}
	var err error
	t.nextFD, err = fdOf(t.next)
	if err == nil {
		t.prevFD, err = fdOf(t.prev)
	}
	return err
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
