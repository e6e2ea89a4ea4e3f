package parallel

import (
	"errors"
	"fmt"
	"runtime"
)

// Sentinel causes of a failed collective; test with errors.Is.
var (
	// ErrPeerLost: a rank's connection closed without a goodbye (the
	// process exited or died) or broke.
	ErrPeerLost = errors.New("connection lost: the process exited or died")
	// ErrDeadline: a rank sent nothing, or no heartbeat, within the deadline.
	ErrDeadline = errors.New("deadline passed")
	// ErrMalformed: a frame failed its checks (length, sequence, collective,
	// checksum).
	ErrMalformed = errors.New("malformed frame")
	// ErrLeft: a rank closed its communicator while others still needed it.
	ErrLeft = errors.New("left the job (closed its communicator)")
	// ErrClosed: the communicator was closed by its own rank.
	ErrClosed = errors.New("communicator closed")
	// ErrNoMPI: the binary was built without -tags mpi.
	ErrNoMPI = errors.New("this gptlab was built without MPI (build with -tags mpi)")
	// ErrUnsupported: a feature this operating system does not offer (the
	// shared-memory transport on Windows). It comes wrapped, with the
	// feature named: test with errors.Is. It is bad input, not a failure
	// of the job (the commands exit 2).
	ErrUnsupported = errors.New("not supported on " + runtime.GOOS)
)

// Error is a failure of the job, the same on every rank: which rank is at
// fault, why, and where it was noticed.
type Error struct {
	Rank   int    // the rank at fault
	Err    error  // one of the sentinel causes
	Detail string // what was observed, for a person
	coll   int64  // the collective it was noticed in, -1 if none
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("rank %d failed: %v", e.Rank, e.Err)
	}
	return fmt.Sprintf("rank %d failed: %v: %s", e.Rank, e.Err, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// causes maps the sentinels to the codes sent between ranks.
var causes = []error{ErrPeerLost, ErrDeadline, ErrMalformed, ErrLeft, ErrClosed}

func causeCode(err error) int {
	for i, c := range causes {
		if errors.Is(err, c) {
			return i
		}
	}
	return -1
}

func causeOf(code int) error {
	if code >= 0 && code < len(causes) {
		return causes[code]
	}
	return errors.New("unknown failure")
}
