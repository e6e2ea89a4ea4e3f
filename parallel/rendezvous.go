package parallel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The rendezvous: rank 0 listens at MASTER_ADDR:MASTER_PORT; every other
// rank connects (retrying until the deadline: rank 0 may start later) and
// says hello: its rank, the world size it was given, its host, the
// address of its data listener, the transport it wants. Rank 0 checks
// them, picks the transport and answers with the job's name and every
// rank's data address. The ranks then set up the transport, and a last
// exchange through rank 0 confirms that every rank did.

type helloMsg struct {
	Rank      int    `json:"rank"`
	World     int    `json:"world"`
	Host      string `json:"host"`
	Data      string `json:"data"`
	Transport string `json:"transport"`
}

type peersMsg struct {
	Job       string   `json:"job"`
	Transport string   `json:"transport"`
	Data      []string `json:"data"`
	Err       string   `json:"err,omitempty"`
}

type readyMsg struct {
	Err string `json:"err,omitempty"`
}

func (c *Comm) join(ctx context.Context, env Env, want string) (err error) {
	if want == "" {
		want = "auto"
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	ct := newControl(c)
	c.ctl = ct
	var dataLn net.Listener
	defer func() {
		if dataLn != nil {
			dataLn.Close()
		}
		if err != nil && parent.Err() != nil {
			err = fmt.Errorf("rank %d: joining the job: %w", c.rank, parent.Err()) // interrupted, not failed
		}
		if err != nil {
			for _, cc := range ct.conns {
				if cc != nil {
					cc.conn.Close()
				}
			}
			var e *Error
			if errors.As(err, &e) {
				writeStatus(e)
			}
		}
	}()
	var peers peersMsg
	if c.rank == 0 {
		fd := os.Getenv(EnvMasterFD)
		os.Unsetenv(EnvMasterFD) // the descriptor serves the first rendezvous; a rejoin listens anew
		ln, err := rendezvousListener(env.Master, fd)
		if err != nil {
			return fmt.Errorf("rank 0: rendezvous: %w", err)
		}
		defer ln.Close()
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		host, _, _ := net.SplitHostPort(env.Master)
		if dataLn, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return fmt.Errorf("rank 0: data listener: %w", err)
		}
		hellos := make([]helloMsg, c.size)
		hellos[0] = helloMsg{0, c.size, hostID(), dataLn.Addr().String(), want}
		if err := c.gatherHellos(ctx, ln, hellos); err != nil {
			return err
		}
		peers, err = c.decide(env, hellos)
		for q := 1; q < c.size; q++ {
			ct.conns[q].sendJSON(ctlPeers, peers, c.deadline)
		}
		if err != nil {
			return err
		}
	} else {
		conn, err := dialRetry(ctx, env.Master)
		if err != nil {
			return &Error{Rank: 0, Err: ErrDeadline, coll: -1,
				Detail: fmt.Sprintf("no rendezvous at %s within %v (%v)", env.Master, c.deadline, err)}
		}
		ct.conns[0] = &ctlConn{conn: conn}
		local := conn.LocalAddr().(*net.TCPAddr).IP
		if dataLn, err = net.Listen("tcp", net.JoinHostPort(local.String(), "0")); err != nil {
			return fmt.Errorf("rank %d: data listener: %w", c.rank, err)
		}
		h := helloMsg{c.rank, c.size, hostID(), dataLn.Addr().String(), want}
		if err := ct.conns[0].sendJSON(ctlHello, h, c.deadline); err != nil {
			return &Error{Rank: 0, Err: ErrPeerLost, coll: -1, Detail: "rendezvous: " + err.Error()}
		}
		// Rank 0 may wait a whole deadline for the other ranks first.
		if err := ct.conns[0].expectKind(ctlPeers, 2*c.deadline, &peers); err != nil {
			return &Error{Rank: 0, Err: ErrPeerLost, coll: -1, Detail: "rendezvous: " + err.Error()}
		}
		if peers.Err != "" {
			return errors.New(peers.Err)
		}
	}
	var setupErr error
	switch peers.Transport {
	case "tcp":
		c.tr, setupErr = c.setupTCP(ctx, peers, dataLn)
	case "shm":
		c.tr, setupErr = c.setupShm(peers)
	}
	var mine readyMsg
	if setupErr != nil {
		mine.Err = setupErr.Error()
	}
	if err := c.exchange(mine); err != nil {
		if c.tr != nil {
			c.tr.close()
		}
		return err
	}
	ct.start()
	return nil
}

// gatherHellos (rank 0) accepts a hello from every other rank.
func (c *Comm) gatherHellos(ctx context.Context, ln net.Listener, hellos []helloMsg) error {
	ct := c.ctl
	for joined := 1; joined < c.size; {
		conn, err := ln.Accept()
		if err != nil {
			var missing []string
			first := -1
			for q := 1; q < c.size; q++ {
				if ct.conns[q] == nil {
					missing = append(missing, fmt.Sprint(q))
					if first < 0 {
						first = q
					}
				}
			}
			return &Error{Rank: first, Err: ErrDeadline, coll: -1, Detail: fmt.Sprintf(
				"rank(s) %s did not join within %v (not started, or given another MASTER_ADDR/MASTER_PORT)", strings.Join(missing, ", "), c.deadline)}
		}
		cc := &ctlConn{conn: conn}
		var h helloMsg
		if err := cc.expectKind(ctlHello, time.Until(deadlineOf(ctx)), &h); err != nil {
			conn.Close() // not a rank of this job
			continue
		}
		var bad string
		switch {
		case h.World != c.size:
			bad = fmt.Sprintf("rank %d was started with WORLD_SIZE=%d, rank 0 with %d", h.Rank, h.World, c.size)
		case h.Rank < 1 || h.Rank >= c.size:
			bad = fmt.Sprintf("a worker joined as rank %d of a world of %d", h.Rank, c.size)
		case ct.conns[h.Rank] != nil:
			bad = fmt.Sprintf("two workers joined as rank %d", h.Rank)
		case h.Transport != hellos[0].Transport:
			bad = fmt.Sprintf("rank %d asked for transport %s, rank 0 for %s", h.Rank, h.Transport, hellos[0].Transport)
		}
		if bad != "" {
			cc.sendJSON(ctlPeers, peersMsg{Err: bad}, c.deadline)
			conn.Close()
			for _, o := range ct.conns {
				if o != nil {
					o.sendJSON(ctlPeers, peersMsg{Err: bad}, c.deadline)
				}
			}
			return errors.New(bad)
		}
		ct.conns[h.Rank] = cc
		hellos[h.Rank] = h
		joined++
	}
	return nil
}

// decide (rank 0) names the job and picks the transport.
func (c *Comm) decide(env Env, hellos []helloMsg) (peersMsg, error) {
	p := peersMsg{Job: env.Job, Data: make([]string, c.size)}
	if p.Job == "" {
		var b [6]byte
		rand.Read(b[:])
		p.Job = hex.EncodeToString(b[:])
	}
	shared := -1 // the first rank on another host than rank 0
	for q, h := range hellos {
		p.Data[q] = h.Data
		if h.Host != hellos[0].Host && shared < 0 {
			shared = q
		}
	}
	switch want := hellos[0].Transport; {
	case want == "tcp", want == "auto" && (shared >= 0 || !shmSupported()):
		p.Transport = "tcp"
	case shared < 0:
		p.Transport = "shm"
	default:
		p.Err = fmt.Sprintf("transport shm: rank %d is on another host than rank 0", shared)
		return p, errors.New(p.Err)
	}
	return p, nil
}

// exchange is a barrier through rank 0 that carries each rank's setup
// error: every rank returns the first one, naming its rank.
func (c *Comm) exchange(mine readyMsg) error {
	ct := c.ctl
	d := c.deadline
	if c.rank != 0 {
		if err := ct.conns[0].sendJSON(ctlReady, mine, d); err != nil {
			return &Error{Rank: 0, Err: ErrPeerLost, coll: -1, Detail: "setup: " + err.Error()}
		}
		var g readyMsg
		if err := ct.conns[0].expectKind(ctlGo, 2*d, &g); err != nil {
			return &Error{Rank: 0, Err: ErrPeerLost, coll: -1, Detail: "setup: " + err.Error()}
		}
		if g.Err != "" {
			return errors.New(g.Err)
		}
		return nil
	}
	var verdict readyMsg
	var failure error
	if mine.Err != "" {
		verdict.Err = "rank 0: " + mine.Err
	}
	for q := 1; q < c.size; q++ {
		var r readyMsg
		if err := ct.conns[q].expectKind(ctlReady, d, &r); err != nil {
			failure = &Error{Rank: q, Err: ErrPeerLost, coll: -1, Detail: "setup: " + err.Error()}
			if verdict.Err == "" {
				verdict.Err = failure.Error()
			}
		} else if r.Err != "" && verdict.Err == "" {
			verdict.Err = fmt.Sprintf("rank %d: %s", q, r.Err)
		}
	}
	for q := 1; q < c.size; q++ {
		ct.conns[q].sendJSON(ctlGo, verdict, d)
	}
	if failure != nil {
		return failure
	}
	if verdict.Err != "" {
		return errors.New(verdict.Err)
	}
	return nil
}

// rendezvousListener is rank 0's listener at master: the one the
// launcher handed down as descriptor fd (EnvMasterFD) when it is set, else
// a new one.
func rendezvousListener(master, fd string) (net.Listener, error) {
	if fd == "" {
		return net.Listen("tcp", master)
	}
	n, err := strconv.Atoi(fd)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%s=%q: want a file descriptor", EnvMasterFD, fd)
	}
	f := os.NewFile(uintptr(n), "rendezvous")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("the listener handed down as %s=%s: %w", EnvMasterFD, fd, err)
	}
	if got := ln.Addr().String(); got != master {
		ln.Close()
		return nil, fmt.Errorf("the listener handed down as %s=%s listens at %s, not at %s", EnvMasterFD, fd, got, master)
	}
	return ln, nil
}

func dialRetry(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Now().Add(DefaultDeadline)
	}
	return d
}

// linkHello opens a data link: the dialing rank names itself and the job.
type linkHello struct {
	Job  string `json:"job"`
	Rank int    `json:"rank"`
}
