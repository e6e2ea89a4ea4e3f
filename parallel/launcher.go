package parallel

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The launcher's connection: every worker that Launch starts dials back
// to the launcher (a loopback TCP listener named by GPTLAB_LAUNCHER) and
// keeps the connection open for its whole life. It is how a worker tells
// the launcher the job's verdict ("RANK<TAB>message", one line), and how a
// worker learns that its launcher died: when the connection closes, the
// worker exits at once (exitLauncherGone). That holds on every system;
// on Linux the kernel's parent-death signal (Pdeathsig) kills the worker
// too, a belt on top of it.
//
// The worker says hello first: "JOB RANK PID". The launcher attributes a
// connection to the worker it started with that rank and process id, and
// holds any other connection open without reading verdicts from it.

// EnvLauncher is the address of the launcher's listener, set by Launch for
// each worker. A worker dials it from FromEnv or Join (whichever comes
// first) when EnvJob and EnvRank are set too.
const EnvLauncher = "GPTLAB_LAUNCHER"

// exitLauncherGone is the exit status of a worker whose launcher's
// connection closed (nobody reads it: the launcher is gone).
const exitLauncherGone = 3

// launcher is this process's connection to its launcher, if it has one.
var launcher struct {
	once sync.Once
	mu   sync.Mutex // serialises the verdicts written
	conn net.Conn
}

// watchLauncher dials the launcher (once per process) and watches the
// connection: when it closes, this process exits at once.
func watchLauncher() {
	launcher.once.Do(func() {
		addr, job, rank := os.Getenv(EnvLauncher), os.Getenv(EnvJob), os.Getenv(EnvRank)
		if addr == "" || job == "" || rank == "" {
			return
		}
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err == nil {
			_, err = fmt.Fprintf(conn, "%s %s %d\n", job, rank, os.Getpid())
		}
		if err != nil {
			launcherGone(err)
		}
		launcher.conn = conn
		go func() {
			// The launcher never writes: a read returns only when the
			// connection closes.
			_, err := io.Copy(io.Discard, conn)
			if err == nil {
				err = io.EOF
			}
			launcherGone(err)
		}()
	})
}

func launcherGone(err error) {
	fmt.Fprintf(os.Stderr, "gptlab: rank %s: the launcher is gone (its connection: %v): exiting\n", os.Getenv(EnvRank), err)
	os.Exit(exitLauncherGone)
}

// writeStatus gives the launcher the job's failure: "RANK<TAB>message".
func writeStatus(e *Error) {
	watchLauncher()
	if launcher.conn == nil {
		return
	}
	launcher.mu.Lock()
	defer launcher.mu.Unlock()
	launcher.conn.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(launcher.conn, "%d\t%s\n", e.Rank, strings.ReplaceAll(e.Error(), "\n", " "))
}

// launchListener is the launcher's side: it accepts the workers'
// connections and reads each one's first verdict.
type launchListener struct {
	ln      *net.TCPListener
	job     string
	workers []*worker // filled before any worker starts
	mu      *sync.Mutex
	accepts sync.WaitGroup
	readers sync.WaitGroup
	connMu  sync.Mutex
	conns   []net.Conn
}

func listenForWorkers(job string, workers []*worker, mu *sync.Mutex) (*launchListener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("launch: the workers' listener: %w", err)
	}
	l := &launchListener{ln: ln.(*net.TCPListener), job: job, workers: workers, mu: mu}
	l.accepts.Add(1)
	go l.accept()
	return l, nil
}

func (l *launchListener) addr() string { return l.ln.Addr().String() }

func (l *launchListener) accept() {
	defer l.accepts.Done()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.connMu.Lock()
		l.conns = append(l.conns, conn)
		l.connMu.Unlock()
		l.readers.Add(1)
		go l.serve(conn)
	}
}

// serve reads a worker's hello and then its verdict.
func (l *launchListener) serve(conn net.Conn) {
	defer l.readers.Done()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	hello, err := br.ReadString('\n')
	if err != nil {
		return
	}
	w := l.match(strings.Fields(hello))
	if w == nil {
		return // not a worker of this job: held open, not read
	}
	conn.SetReadDeadline(time.Time{})
	line, err := br.ReadString('\n')
	if err == nil {
		rs, msg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
		l.mu.Lock()
		w.verdict, w.vAt = msg, time.Now()
		w.vRank, _ = strconv.Atoi(rs)
		l.mu.Unlock()
	}
	io.Copy(io.Discard, br)
}

// match finds the worker a hello names: this job, its rank, its pid.
func (l *launchListener) match(f []string) *worker {
	if len(f) != 3 || f[0] != l.job {
		return nil
	}
	r, err1 := strconv.Atoi(f[1])
	pid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || r < 0 || r >= len(l.workers) {
		return nil
	}
	w := l.workers[r]
	select {
	case <-w.startedC:
	case <-time.After(10 * time.Second):
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.cmd == nil || w.cmd.Process == nil || w.cmd.Process.Pid != pid || w.conn {
		return nil
	}
	w.conn = true
	return w
}

// drain, once every worker has exited, takes what is left: connections
// still in the listener's queue and the verdicts on them.
func (l *launchListener) drain() {
	l.ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
	l.accepts.Wait()
	l.readers.Wait()
}

// close ends the listener and every connection (a worker still alive
// exits when its connection closes).
func (l *launchListener) close() {
	l.ln.Close()
	l.accepts.Wait()
	l.connMu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.connMu.Unlock()
}
