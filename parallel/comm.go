package parallel

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gptlab/internal/platform"
	"gptlab/internal/vec"
)

// DefaultDeadline bounds every wait unless Options or GPTLAB_DEADLINE say
// otherwise.
const DefaultDeadline = 10 * time.Second

// Options configure Join.
type Options struct {
	// Transport is "auto" (or ""): shared memory when every rank is on
	// this host (and the system has it: not Windows), else TCP; or "shm",
	// "tcp", or "mpi" (-tags mpi builds run under mpirun).
	Transport string
	// Deadline bounds every wait: rendezvous, each frame, heartbeats.
	// 0: the environment's GPTLAB_DEADLINE, else DefaultDeadline.
	Deadline time.Duration
	// ChunkBytes bounds a frame (rounded down to a multiple of 64 bytes,
	// at most the transport's default: 1 MiB on TCP, 256 KiB on shm).
	// 0 picks the default.
	ChunkBytes int
}

// Transports are the values Options.Transport accepts.
var Transports = []string{"auto", "shm", "tcp", "mpi"}

// CheckTransport refuses a transport Join would refuse before it starts:
// a name not in Transports, or one this system cannot run (shm on
// Windows: the error wraps ErrUnsupported). "" is "auto".
func CheckTransport(name string) error {
	switch name {
	case "", "auto", "tcp", "mpi":
		return nil
	case "shm":
		if !shmSupported() {
			return fmt.Errorf("parallel: transport shm (shared memory): %w; use tcp", ErrUnsupported)
		}
		return nil
	}
	return fmt.Errorf("parallel: transport %q: want one of auto, shm, tcp, mpi", name)
}

// shmSupported says whether the shm transport is offered: built for this
// system (not Windows) and not turned off through platform.SharedMemory,
// the seam by which a test elsewhere takes Windows's refusal.
func shmSupported() bool { return shmBuilt && platform.SharedMemory }

// Comm is one rank's communicator: the collectives of a job.
type Comm struct {
	rank, size int
	deadline   time.Duration
	chunk      int
	tr         transport
	count      counters

	// issue order: collectives run one at a time, in the order issued.
	issueMu  sync.Mutex
	execMu   sync.Mutex
	inflight int      // queued asynchronous collectives not yet done
	queue    chan *op // asynchronous collectives, run by stream
	issued   uint32   // collectives issued: the next one's id
	closed   bool
	streamWG sync.WaitGroup

	ctl     *control // nil when the world has one rank
	started atomic.Uint64

	verdict   atomic.Pointer[Error]
	aborted   chan struct{} // closed when verdict is set
	verdictMu sync.Mutex    // held while the verdict is told to the others
	closeMu   sync.Mutex
	done      bool

	plans map[planKey]*plan

	// onSend, when set (tests), is called after each frame this rank sends,
	// with the number of frames sent so far.
	onSend func(sent uint64)
}

type planKey struct {
	kind     Kind
	n, elem  int
	root     int
	chunkLen int
}

// op is one collective in flight.
type op struct {
	kind Kind
	coll uint32
	buf  []byte
	elem int // 4 for float32 (reductions), 1 for bytes
	root int
	done chan struct{}
	err  error
}

// transport moves a plan's frames between a rank and its ring neighbours.
type transport interface {
	name() string
	// run executes rank's plan for o; a failure it observes is passed to
	// fail, whose verdict it returns.
	run(o *op, pl *plan) error
	// abort unblocks any wait in run (the job has failed).
	abort()
	close() error
	defaultChunk() int
}

// native is a transport with collectives of its own (MPI): the ring plan is
// not used.
type native interface {
	collective(o *op) error
}

// Join makes this process rank env.Rank of a job of env.WorldSize ranks:
// rank 0 listens at env.Master, the others connect to it, and together
// they set up the transport. It returns once every rank has joined, or
// fails naming the rank that did not.
func Join(ctx context.Context, env Env, opt Options) (*Comm, error) {
	watchLauncher()
	d := opt.Deadline
	if d == 0 {
		d = env.Deadline
	}
	if d == 0 {
		d = DefaultDeadline
	}
	if d < 0 {
		return nil, fmt.Errorf("parallel: deadline %v: want > 0", d)
	}
	if err := CheckTransport(opt.Transport); err != nil {
		return nil, err
	}
	c := &Comm{rank: env.Rank, size: env.WorldSize, deadline: d, aborted: make(chan struct{}), plans: map[planKey]*plan{}}
	var err error
	switch {
	case opt.Transport == "mpi":
		c.tr, err = joinMPI(c)
	case c.size == 1:
		c.tr = self{}
	default:
		err = c.join(ctx, env, opt.Transport)
	}
	if err != nil {
		return nil, err
	}
	c.chunk = c.tr.defaultChunk()
	if opt.ChunkBytes > 0 {
		c.chunk = min(c.chunk, max(64, opt.ChunkBytes/64*64))
	}
	c.queue = make(chan *op, 1024)
	c.streamWG.Add(1)
	go c.stream()
	return c, nil
}

// Rank is this process's rank, 0 ≤ Rank < Size.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Transport names the transport in use: "shm", "tcp", "mpi" or "self".
func (c *Comm) Transport() string { return c.tr.name() }

// Deadline is the bound on every wait.
func (c *Comm) Deadline() time.Duration { return c.deadline }

// Stats returns this rank's byte counters per collective since Join.
func (c *Comm) Stats() Stats { return c.count.snapshot() }

// Segment returns the elements [lo, hi) of an n-element buffer this rank
// owns after ReduceScatter (and gives in AllGather).
func (c *Comm) Segment(n int) (lo, hi int) { return Segment(n, c.size, c.rank) }

// AllReduce replaces buf, on every rank, by the element-wise sum over ranks.
func (c *Comm) AllReduce(buf []float32) error {
	return c.do(AllReduce, f32bytes(buf), 4, 0)
}

// AllReduceAsync starts an all-reduce of buf and returns at once; buf must
// not be read or written until the handle's Wait returns.
func (c *Comm) AllReduceAsync(buf []float32) *Handle {
	return c.async(AllReduce, f32bytes(buf), 4, 0)
}

// ReduceScatter sums buf over ranks and leaves in buf[lo:hi] (lo, hi :=
// c.Segment(len(buf))) this rank's segment of the sum; the rest of buf is
// overwritten with partial sums.
func (c *Comm) ReduceScatter(buf []float32) error {
	return c.do(ReduceScatter, f32bytes(buf), 4, 0)
}

// AllGather fills buf on every rank with every rank's segment: rank i
// contributes buf[Segment(len(buf), size, i)].
func (c *Comm) AllGather(buf []float32) error {
	return c.do(AllGather, f32bytes(buf), 4, 0)
}

// Broadcast copies root's buf into every rank's buf.
func (c *Comm) Broadcast(buf []float32, root int) error {
	return c.do(Broadcast, f32bytes(buf), 4, root)
}

// BroadcastBytes copies root's buf into every rank's buf.
func (c *Comm) BroadcastBytes(buf []byte, root int) error {
	return c.do(Broadcast, buf, 1, root)
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier() error { return c.do(Barrier, nil, 1, 0) }

// Handle is an asynchronous collective in flight.
type Handle struct{ o *op }

// Wait blocks until the collective is done on this rank and returns its
// error. It returns within the communicator's deadline of the last
// progress: a failed job never leaves it waiting.
func (h *Handle) Wait() error {
	<-h.o.done
	return h.o.err
}

// Done is closed when the collective is done.
func (h *Handle) Done() <-chan struct{} { return h.o.done }

func (c *Comm) newOp(kind Kind, buf []byte, elem, root int) (*op, error) {
	if root < 0 || root >= c.size {
		return nil, fmt.Errorf("parallel: %s root %d: want 0 ≤ root < %d", kind, root, c.size)
	}
	if c.closed {
		return nil, ErrClosed
	}
	o := &op{kind: kind, coll: c.issued, buf: buf, elem: elem, root: root}
	c.issued++
	return o, nil
}

// do runs a collective and returns when it is done: on the calling
// goroutine when nothing is queued (no hand-off on the latency path), else
// after the queued ones.
func (c *Comm) do(kind Kind, buf []byte, elem, root int) error {
	c.issueMu.Lock()
	o, err := c.newOp(kind, buf, elem, root)
	if err != nil {
		c.issueMu.Unlock()
		return err
	}
	if c.inflight == 0 {
		c.execMu.Lock()
		c.issueMu.Unlock()
		err := c.exec(o)
		c.execMu.Unlock()
		return err
	}
	o.done = make(chan struct{})
	c.inflight++
	c.queue <- o
	c.issueMu.Unlock()
	return (&Handle{o}).Wait()
}

func (c *Comm) async(kind Kind, buf []byte, elem, root int) *Handle {
	c.issueMu.Lock()
	defer c.issueMu.Unlock()
	o, err := c.newOp(kind, buf, elem, root)
	if err != nil {
		o = &op{kind: kind, err: err, done: make(chan struct{})}
		close(o.done)
		return &Handle{o}
	}
	o.done = make(chan struct{})
	c.inflight++
	c.queue <- o
	return &Handle{o}
}

// stream runs the queued collectives in order.
func (c *Comm) stream() {
	defer c.streamWG.Done()
	for o := range c.queue {
		c.execMu.Lock()
		o.err = c.exec(o)
		c.execMu.Unlock()
		c.issueMu.Lock()
		c.inflight--
		c.issueMu.Unlock()
		close(o.done)
	}
}

func (c *Comm) exec(o *op) error {
	c.count[o.kind].calls.Add(1)
	c.started.Store(uint64(o.coll) + 1)
	if v := c.verdict.Load(); v != nil {
		return v
	}
	if o.elem == 4 && len(o.buf)%4 != 0 {
		return fmt.Errorf("parallel: %s of %d bytes: not whole float32s", o.kind, len(o.buf))
	}
	if n, ok := c.tr.(native); ok {
		return n.collective(o)
	}
	k := planKey{o.kind, len(o.buf) / o.elem, o.elem, o.root, c.chunk}
	pl := c.plans[k]
	if pl == nil {
		pl = ringPlan(o.kind, k.n, o.elem, c.size, c.rank, o.root, c.chunk)
		if len(c.plans) > 256 {
			clear(c.plans)
		}
		c.plans[k] = pl
	}
	return c.tr.run(o, pl)
}

// Close says goodbye to the other ranks and releases the transport. It
// waits for the queued collectives first.
func (c *Comm) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.done {
		return nil
	}
	c.done = true
	c.issueMu.Lock()
	c.closed = true
	close(c.queue)
	c.issueMu.Unlock()
	c.streamWG.Wait()
	if c.ctl != nil {
		// Wait for a verdict being told (setVerdict holds verdictMu while it
		// tells the others) before the links close. The lock cannot be held
		// across ctl.close: close waits for the heartbeat and the readers,
		// and they may call setVerdict.
		c.verdictMu.Lock()
		//lint:ignore SA2001 the empty critical section is a barrier: it waits for a setVerdict in progress
		c.verdictMu.Unlock()
		c.ctl.close(c.verdict.Load() == nil)
	}
	return c.tr.close()
}

// fail turns what this rank observed into the job's verdict: the first
// failure rank 0 hears of, told to every rank. A rank other than 0
// reports to rank 0 and waits briefly for the verdict; if rank 0 does not
// answer (it may be the rank that died), its own observation stands.
func (c *Comm) fail(e *Error) error {
	if v := c.verdict.Load(); v != nil {
		return v
	}
	if c.ctl == nil {
		c.setVerdict(e)
		return c.verdict.Load()
	}
	c.ctl.report(e)
	return c.verdict.Load()
}

// setVerdict records the job's failure once and unblocks every wait.
func (c *Comm) setVerdict(e *Error) {
	c.verdictMu.Lock()
	defer c.verdictMu.Unlock()
	if !c.verdict.CompareAndSwap(nil, e) {
		return
	}
	close(c.aborted)
	c.tr.abort()
	if c.ctl != nil {
		c.ctl.verdictSet(e)
	}
}

// failed returns the verdict once the job has failed, else nil.
func (c *Comm) failed() error {
	if v := c.verdict.Load(); v != nil {
		return v
	}
	return nil
}

func (c *Comm) where(o *op) string { return fmt.Sprintf("%s #%d", o.kind, o.coll) }

// self is the transport of a one-rank world: every collective is the
// identity.
type self struct{}

func (self) name() string           { return "self" }
func (self) run(*op, *plan) error   { return nil }
func (self) abort()                 {}
func (self) close() error           { return nil }
func (self) defaultChunk() int      { return 1 << 20 }
func (self) collective(o *op) error { return nil }

func f32bytes(b []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), 4*len(b))
}

func bytesF32(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// addInto sets dst = recv + dst, element by element, as float32.
func addInto(dst, recv []byte) {
	d := bytesF32(dst)
	vec.Add(d, bytesF32(recv), d)
}
