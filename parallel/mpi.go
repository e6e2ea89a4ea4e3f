//go:build mpi

package parallel

/*
#cgo pkg-config: ompi-c
#include <mpi.h>
#include <stdlib.h>

static int gl_init(int *provided) {
	int flag;
	MPI_Initialized(&flag);
	if (flag) return -1;
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
	if (rc == MPI_SUCCESS) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	return rc;
}
static int gl_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
static int gl_size(int *s) { return MPI_Comm_size(MPI_COMM_WORLD, s); }
static int gl_allreduce(float *buf, int n) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static int gl_reduce_scatter(float *in, float *out, int *counts) {
	return MPI_Reduce_scatter(in, out, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static int gl_allgather(float *buf, int *counts, int *displs) {
	return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
}
static int gl_bcast(void *buf, int n, int bytes, int root) {
	return MPI_Bcast(buf, n, bytes ? MPI_BYTE : MPI_FLOAT, root, MPI_COMM_WORLD);
}
static int gl_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }
static void gl_error_string(int code, char *s, int *len) { MPI_Error_string(code, s, len); }
static int gl_finalize(void) { return MPI_Finalize(); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// MPIBuilt reports whether this binary has the MPI backend (-tags mpi).
const MPIBuilt = true

// The MPI backend: the same collectives through OpenMPI's own
// (MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgatherv, MPI_Bcast,
// MPI_Barrier) on MPI_COMM_WORLD, in a process started by mpirun: rank and
// size come from MPI, not from torchrun's variables. MPI is initialised
// once per process (MPI_THREAD_SERIALIZED: the communicator already runs
// one collective at a time) on a thread kept for it, which also finalises
// it at Close. MPI moves the bytes itself, so only the calls are counted,
// and MPI's own failure policy applies (mpirun ends the job when a rank
// dies); there is no deadline on an MPI call.
type mpiComm struct {
	finalize chan struct{}
	done     chan error
}

func joinMPI(c *Comm) (transport, error) {
	m := &mpiComm{finalize: make(chan struct{}), done: make(chan error, 1)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var provided C.int
		if rc := C.gl_init(&provided); rc != 0 {
			if rc == -1 {
				ready <- errors.New("parallel: MPI is already initialised in this process (one MPI communicator per process)")
			} else {
				ready <- fmt.Errorf("parallel: MPI_Init_thread: %s", mpiError(rc))
			}
			return
		}
		if provided < C.MPI_THREAD_SERIALIZED {
			C.gl_finalize()
			ready <- fmt.Errorf("parallel: this MPI provides thread level %d, want MPI_THREAD_SERIALIZED", int(provided))
			return
		}
		ready <- nil
		<-m.finalize
		if rc := C.gl_finalize(); rc != 0 {
			m.done <- fmt.Errorf("parallel: MPI_Finalize: %s", mpiError(rc))
			return
		}
		m.done <- nil
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	var r, s C.int
	C.gl_rank(&r)
	C.gl_size(&s)
	c.rank, c.size = int(r), int(s)
	return m, nil
}

func mpiError(rc C.int) string {
	buf := make([]byte, C.MPI_MAX_ERROR_STRING)
	var n C.int
	C.gl_error_string(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n)
	return string(buf[:n])
}

func (m *mpiComm) name() string      { return "mpi" }
func (m *mpiComm) defaultChunk() int { return 1 << 20 }
func (m *mpiComm) abort()            {}
func (m *mpiComm) run(*op, *plan) error {
	return errors.New("parallel: the MPI backend has no ring plan")
}

func (m *mpiComm) close() error {
	close(m.finalize)
	return <-m.done
}

// collective runs o through MPI's own collective.
func (m *mpiComm) collective(o *op) error {
	n := len(o.buf) / o.elem
	var p unsafe.Pointer
	if len(o.buf) > 0 {
		p = unsafe.Pointer(&o.buf[0])
	}
	var rc C.int
	switch o.kind {
	case AllReduce:
		rc = C.gl_allreduce((*C.float)(p), C.int(n))
	case ReduceScatter:
		size, rank := m.world()
		counts := make([]C.int, size)
		for i := range size {
			lo, hi := Segment(n, size, i)
			counts[i] = C.int(hi - lo)
		}
		lo, hi := Segment(n, size, rank)
		out := (*C.float)(C.malloc(C.size_t(4 * max(1, hi-lo))))
		defer C.free(unsafe.Pointer(out))
		rc = C.gl_reduce_scatter((*C.float)(p), out, &counts[0])
		if rc == 0 && hi > lo {
			copy(o.buf[4*lo:4*hi], unsafe.Slice((*byte)(unsafe.Pointer(out)), 4*(hi-lo)))
		}
	case AllGather:
		size, _ := m.world()
		counts, displs := make([]C.int, size), make([]C.int, size)
		for i := range size {
			lo, hi := Segment(n, size, i)
			counts[i], displs[i] = C.int(hi-lo), C.int(lo)
		}
		rc = C.gl_allgather((*C.float)(p), &counts[0], &displs[0])
	case Broadcast:
		bytes := C.int(0)
		if o.elem == 1 {
			bytes = 1
		}
		rc = C.gl_bcast(p, C.int(n), bytes, C.int(o.root))
	case Barrier:
		rc = C.gl_barrier()
	}
	if rc != 0 {
		return fmt.Errorf("parallel: MPI %s: %s", o.kind, mpiError(rc))
	}
	return nil
}

func (m *mpiComm) world() (size, rank int) {
	var r, s C.int
	C.gl_rank(&r)
	C.gl_size(&s)
	return int(s), int(r)
}
