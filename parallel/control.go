package parallel

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// The control plane: every rank keeps the TCP connection it joined over to
// rank 0 (rank 0 keeps one per rank). It carries the rendezvous, then
// heartbeats both ways, failure reports to rank 0, rank 0's verdicts to
// every rank, and goodbyes. It carries no collective data: its bytes are
// not in Stats.

// Control message kinds (a frame's kind byte).
const (
	ctlHello uint8 = 0x40 + iota
	ctlPeers
	ctlReady
	ctlGo
	ctlHeartbeat
	ctlFail
	ctlAbort
	ctlBye
	ctlLink
)

var controlNames = map[uint8]string{
	ctlHello: "hello", ctlPeers: "peers", ctlReady: "ready", ctlGo: "go", ctlHeartbeat: "heartbeat",
	ctlFail: "failure report", ctlAbort: "verdict", ctlBye: "goodbye", ctlLink: "link hello",
}

// ctlConn is one control connection; sends are serialised.
type ctlConn struct {
	mu   sync.Mutex
	conn net.Conn
	wbuf []byte
	rhdr [headerLen]byte
	rtrl [trailerLen]byte
}

func (cc *ctlConn) send(kind uint8, payload []byte, d time.Duration) error {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.wbuf = append(cc.wbuf[:0], make([]byte, headerLen)...)
	putHeader(cc.wbuf, header{kind: kind, length: uint32(len(payload))})
	cc.wbuf = append(cc.wbuf, payload...)
	cc.wbuf = binary.LittleEndian.AppendUint32(cc.wbuf, frameCRC(cc.wbuf, payload))
	cc.conn.SetWriteDeadline(time.Now().Add(d))
	_, err := cc.conn.Write(cc.wbuf)
	return err
}

// recv reads one control frame; d > 0 bounds the wait (0 leaves the
// connection's deadline as it is).
func (cc *ctlConn) recv(d time.Duration) (uint8, []byte, error) {
	if d > 0 {
		cc.conn.SetReadDeadline(time.Now().Add(d))
	}
	if _, err := io.ReadFull(cc.conn, cc.rhdr[:]); err != nil {
		return 0, nil, err
	}
	h, err := parseHeader(cc.rhdr[:])
	if err != nil {
		return 0, nil, err
	}
	if h.length > maxControlLen {
		return 0, nil, fmt.Errorf("%w: control payload of %d bytes, want at most %d", ErrMalformed, h.length, maxControlLen)
	}
	payload := make([]byte, h.length)
	if _, err := io.ReadFull(cc.conn, payload); err != nil {
		return 0, nil, err
	}
	if _, err := io.ReadFull(cc.conn, cc.rtrl[:]); err != nil {
		return 0, nil, err
	}
	if err := checkCRC(frameCRC(cc.rhdr[:], payload), cc.rtrl[:], len(payload)); err != nil {
		return 0, nil, err
	}
	return h.kind, payload, nil
}

// expectKind reads a control frame of a given kind and decodes its JSON.
func (cc *ctlConn) expectKind(kind uint8, d time.Duration, v any) error {
	k, payload, err := cc.recv(d)
	if err != nil {
		return err
	}
	if k != kind {
		return fmt.Errorf("%w: %s, want %s", ErrMalformed, kindName(k), kindName(kind))
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, kindName(k), err)
	}
	return nil
}

func (cc *ctlConn) sendJSON(kind uint8, v any, d time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return cc.send(kind, b, d)
}

// failMsg is a failure on the wire: a report to rank 0, or its verdict.
type failMsg struct {
	Rank   int    `json:"rank"`
	Cause  int    `json:"cause"`
	Detail string `json:"detail"`
	Coll   int64  `json:"coll"` // the collective it was noticed in, -1 if none
}

// control is the live control plane of a communicator.
type control struct {
	c        *Comm
	conns    []*ctlConn // rank 0: conns[q] for q ≥ 1; others: conns[0]
	lastSeen []atomic.Int64
	started  []atomic.Uint64 // collectives each rank had entered, as of its last heartbeat
	bye      []atomic.Bool
	gone     []chan struct{} // closed when q's control connection broke
	closing  atomic.Bool
	stop     chan struct{}
	readers  sync.WaitGroup
	beat     sync.WaitGroup
}

func newControl(c *Comm) *control {
	ct := &control{c: c, conns: make([]*ctlConn, c.size), lastSeen: make([]atomic.Int64, c.size),
		started: make([]atomic.Uint64, c.size), bye: make([]atomic.Bool, c.size), stop: make(chan struct{}),
		gone: make([]chan struct{}, c.size)}
	for q := range ct.gone {
		ct.gone[q] = make(chan struct{})
	}
	return ct
}

// peers are the ranks this one exchanges control messages with.
func (ct *control) peers() []int {
	if ct.c.rank != 0 {
		return []int{0}
	}
	out := make([]int, 0, ct.c.size-1)
	for q := 1; q < ct.c.size; q++ {
		out = append(out, q)
	}
	return out
}

// start runs the reader of every control connection and the heartbeat.
func (ct *control) start() {
	now := time.Now().UnixNano()
	for _, q := range ct.peers() {
		ct.lastSeen[q].Store(now)
		ct.conns[q].conn.SetReadDeadline(time.Time{})
		ct.readers.Add(1)
		go ct.readLoop(q)
	}
	ct.beat.Add(1)
	go ct.heartbeat()
}

func (ct *control) readLoop(q int) {
	defer ct.readers.Done()
	cc := ct.conns[q]
	for {
		kind, payload, err := cc.recv(0)
		if err != nil {
			if ct.closing.Load() || ct.bye[q].Load() {
				return
			}
			close(ct.gone[q])
			cause := ErrPeerLost
			detail := "its control connection closed"
			if errors.Is(err, ErrMalformed) {
				cause, detail = ErrMalformed, "control link: "+err.Error()
			} else if !errors.Is(err, io.EOF) {
				detail = "control link: " + err.Error()
			}
			ct.c.fail(&Error{Rank: q, Err: cause, Detail: detail, coll: -1})
			return
		}
		ct.lastSeen[q].Store(time.Now().UnixNano())
		switch kind {
		case ctlHeartbeat:
			if len(payload) == 8 {
				ct.started[q].Store(binary.LittleEndian.Uint64(payload))
			}
		case ctlFail, ctlAbort:
			var m failMsg
			if err := json.Unmarshal(payload, &m); err != nil || m.Rank < 0 || m.Rank >= ct.c.size {
				ct.c.fail(&Error{Rank: q, Err: ErrMalformed, Detail: "undecodable " + kindName(kind), coll: -1})
				return
			}
			e := &Error{Rank: m.Rank, Err: causeOf(m.Cause), Detail: m.Detail, coll: m.Coll}
			if kind == ctlFail && ct.c.rank == 0 {
				ct.c.setVerdict(ct.refine(e))
			} else {
				ct.c.setVerdict(e)
			}
		case ctlBye:
			ct.bye[q].Store(true)
			cc.mu.Lock()
			if tc, ok := cc.conn.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			cc.mu.Unlock()
		}
	}
}

// heartbeat sends this rank's progress every deadline/5 and fails the job
// when a watched rank has been silent for a whole deadline.
func (ct *control) heartbeat() {
	defer ct.beat.Done()
	d := ct.c.deadline
	tick := time.NewTicker(max(d/5, 5*time.Millisecond))
	defer tick.Stop()
	var msg [8]byte
	for {
		select {
		case <-ct.stop:
			return
		case <-tick.C:
		}
		binary.LittleEndian.PutUint64(msg[:], ct.c.started.Load())
		now := time.Now()
		for _, q := range ct.peers() {
			if ct.bye[q].Load() {
				continue
			}
			ct.conns[q].send(ctlHeartbeat, msg[:], d)
			if silent := now.Sub(time.Unix(0, ct.lastSeen[q].Load())); silent > d && ct.c.verdict.Load() == nil {
				ct.c.fail(&Error{Rank: q, Err: ErrDeadline, coll: -1,
					Detail: fmt.Sprintf("no heartbeat for %v: the process is stopped or hung", silent.Round(time.Millisecond))})
			}
		}
	}
}

// report hands what this rank saw to the arbiter.
func (ct *control) report(e *Error) {
	c := ct.c
	if c.rank == 0 {
		c.setVerdict(ct.refine(e))
		return
	}
	if e.Rank == 0 || ct.bye[0].Load() {
		// Rank 0 cannot judge its own failure, but a verdict it sent just
		// before it went may still be unread on the control connection.
		select {
		case <-c.aborted:
		case <-ct.gone[0]:
		case <-time.After(min(time.Second, c.deadline/2)):
		}
		c.setVerdict(e)
		return
	}
	ct.conns[0].sendJSON(ctlFail, failMsg{e.Rank, causeCode(e.Err), e.Detail, e.coll}, c.deadline)
	select {
	case <-c.aborted:
	case <-time.After(min(time.Second, c.deadline/2)):
		c.setVerdict(e)
	}
}

// refine (rank 0) looks behind a timeout for its origin: a rank whose
// heartbeats stopped, or one that never entered the collective the others
// wait in.
func (ct *control) refine(e *Error) *Error {
	if !errors.Is(e.Err, ErrDeadline) || e.coll < 0 {
		return e
	}
	c := ct.c
	now := time.Now()
	for q := 1; q < c.size; q++ {
		if silent := now.Sub(time.Unix(0, ct.lastSeen[q].Load())); !ct.bye[q].Load() && silent > c.deadline/2 {
			return &Error{Rank: q, Err: ErrDeadline, coll: e.coll,
				Detail: fmt.Sprintf("no heartbeat for %v: the process is stopped or hung", silent.Round(time.Millisecond))}
		}
	}
	for q := 0; q < c.size; q++ {
		entered := c.started.Load()
		if q > 0 {
			entered = ct.started[q].Load()
		}
		if entered < uint64(e.coll)+1 {
			return &Error{Rank: q, Err: ErrDeadline, coll: e.coll,
				Detail: fmt.Sprintf("did not enter collective #%d within %v: alive, but blocked or busy elsewhere", e.coll, c.deadline)}
		}
	}
	return e
}

// verdictSet tells the other ranks (rank 0) and the launcher.
func (ct *control) verdictSet(e *Error) {
	if ct.c.rank == 0 {
		for _, q := range ct.peers() {
			if !ct.bye[q].Load() {
				ct.conns[q].sendJSON(ctlAbort, failMsg{e.Rank, causeCode(e.Err), e.Detail, e.coll}, time.Second)
			}
		}
	}
	writeStatus(e)
}

// close says goodbye (when the job has not failed), ends its side of
// every control connection and waits briefly for the other side to end
// theirs, reading what is left, so that what this rank sent last (a
// goodbye, a verdict) is delivered, not reset.
func (ct *control) close(goodbye bool) {
	ct.closing.Store(true)
	close(ct.stop)
	ct.beat.Wait()
	linger := min(time.Second, ct.c.deadline)
	if !goodbye {
		linger = min(200*time.Millisecond, linger) // the job failed: be quick
	}
	for _, q := range ct.peers() {
		cc := ct.conns[q]
		if goodbye && !ct.bye[q].Load() {
			cc.send(ctlBye, nil, time.Second)
		}
		cc.mu.Lock()
		if tc, ok := cc.conn.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		cc.mu.Unlock()
		cc.conn.SetReadDeadline(time.Now().Add(linger))
	}
	ct.readers.Wait()
	for _, q := range ct.peers() {
		ct.conns[q].conn.Close()
	}
}
