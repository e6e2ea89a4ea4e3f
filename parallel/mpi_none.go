//go:build !mpi

package parallel

func joinMPI(c *Comm) (transport, error) { return nil, ErrNoMPI }

// MPIBuilt reports whether this binary has the MPI backend (-tags mpi).
const MPIBuilt = false
