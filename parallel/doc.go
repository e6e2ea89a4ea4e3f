// Package parallel owns processes and collectives: starting a job's worker
// processes with torchrun's environment (Launch), the TCP rendezvous that
// joins them into one communicator (Join), two transports between ranks —
// TCP with framed, checksummed messages, and shared-memory rings in
// /dev/shm (the temporary directory on macOS) for ranks on one host — and
// an MPI backend behind `-tags mpi`;
// the ring collectives on float32 buffers (all-reduce as reduce-scatter
// then all-gather, reduce-scatter, all-gather, broadcast, barrier), an
// asynchronous all-reduce, and the count of every byte each rank sends and
// receives, per collective.
//
// # Systems
//
// Linux and macOS have everything. Windows has TCP (on an engine of
// blocking reads and writes) but no shared-memory transport: Join and
// CheckTransport refuse "shm" with an error wrapping ErrUnsupported, and
// "auto" picks TCP. A launched worker exits when its launcher dies, on
// every system, because its connection to the launcher closes (Launch);
// on Linux the parent-death signal does it too.
//
// It does not know the GPT, gradients, buckets or commands: the labs in
// experiments compose it with models.
//
// # Results
//
// A collective's result does not depend on timing. Every element of an
// all-reduce is summed in a fixed order: segment i (Segment) is the sum
// x[i+1] + x[i+2] + ... + x[i] over ranks, taken in that ring order, and
// every rank receives the same bits of it. Runs with the same inputs give
// the same bits on every rank, every time.
//
// # Failures
//
// Every wait has a deadline (Options.Deadline, 10 s by default; the
// GPTLAB_DEADLINE variable sets it for launched workers). A rank that dies
// (its connections close), hangs (no heartbeat, or no data, past the
// deadline) or sends a malformed frame makes every rank's current and later
// collectives fail with the same *Error, which names the rank at fault and
// the cause. Rank 0 arbitrates: a rank that observes a failure reports it
// to rank 0, which tells every other rank.
//
// # Calling order
//
// Like MPI and NCCL, every rank must issue the same collectives in the
// same order. Asynchronous all-reduces (AllReduceAsync) run one after
// another on the communicator's own goroutine, in the order issued;
// synchronous calls are ordered after them.
package parallel
