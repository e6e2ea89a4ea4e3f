//go:build mpi

package parallel

import (
	"context"
	"sync"
	"testing"
)

// The MPI backend passes the same collective checks as the ring
// transports. Run the -tags mpi test binary under mpirun with two ranks:
//
//	go test -c -tags mpi -o parallel-mpi.test ./parallel
//	mpirun --allow-run-as-root -np 2 ./parallel-mpi.test -test.run MPI
//
// With two ranks MPI's sums are the ring's (a+b is b+a); with more, MPI
// picks its own order, so the bitwise checks need -np 2.

var (
	mpiOnce sync.Once
	mpiC    *Comm
	mpiErr  error
)

func joinedMPI(t *testing.T) *Comm {
	t.Helper()
	if !UnderMPI() {
		t.Skip("not started by mpirun: run this test binary with mpirun -np 2")
	}
	mpiOnce.Do(func() {
		mpiC, mpiErr = Join(context.Background(), Env{}, Options{Transport: "mpi"})
		if mpiErr == nil {
			afterTests = append(afterTests, func() { mpiC.Close() })
		}
	})
	if mpiErr != nil {
		t.Fatal(mpiErr)
	}
	if mpiC.Size() != 2 {
		t.Skipf("MPI world of %d ranks: the bitwise checks need -np 2", mpiC.Size())
	}
	return mpiC
}

func TestMPICollectives(t *testing.T) {
	c := joinedMPI(t)
	if c.Transport() != "mpi" {
		t.Fatalf("transport %q, want mpi", c.Transport())
	}
	if err := checkCollectives(c); err != nil {
		t.Fatalf("rank %d: %v", c.Rank(), err)
	}
	if got := c.Stats().Of(AllReduce).Calls; got == 0 {
		t.Fatal("no all-reduce counted")
	}
}
