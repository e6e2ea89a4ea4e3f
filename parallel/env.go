package parallel

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// The variables a worker reads, as torchrun sets them, and gptlab's own.
const (
	EnvRank       = "RANK"
	EnvWorldSize  = "WORLD_SIZE"
	EnvLocalRank  = "LOCAL_RANK"
	EnvMasterAddr = "MASTER_ADDR"
	EnvMasterPort = "MASTER_PORT"
	// EnvDeadline (a Go duration, "10s") overrides Options.Deadline.
	EnvDeadline = "GPTLAB_DEADLINE"
	// EnvJob names the job; the launcher sets it so its shared-memory
	// files carry a name the launcher can sweep.
	EnvJob = "GPTLAB_JOB"
	// EnvMasterFD is the descriptor of rank 0's rendezvous listener when
	// the launcher chose the port: it listens before it starts rank 0 and
	// hands the listener down, so no other process can take the port in
	// between (a port found free, closed and bound again by rank 0 was
	// once taken by a concurrent test: "address already in use").
	EnvMasterFD = "GPTLAB_MASTER_FD"
)

// Env is where a rank sits in its job: torchrun's variables.
type Env struct {
	Rank, WorldSize, LocalRank int
	Master                     string // host:port of rank 0's rendezvous
	Deadline                   time.Duration
	Job                        string // from GPTLAB_JOB, or ""
}

// Launched reports whether the process runs as a rank of a job (RANK is set).
func Launched() bool { return os.Getenv(EnvRank) != "" }

// UnderMPI reports whether the process was started by OpenMPI's mpirun
// (its rank and size then come from MPI: Options{Transport: "mpi"}).
func UnderMPI() bool { return os.Getenv("OMPI_COMM_WORLD_SIZE") != "" }

// FromEnv reads the job from the environment. Every variable is checked:
// the error names the one at fault and its value. A worker started by
// Launch also connects back to its launcher here, and exits at once when
// that connection closes (the launcher died).
func FromEnv() (Env, error) {
	watchLauncher()
	return ParseEnv(os.Getenv)
}

// ParseEnv reads the job from the variables getenv returns.
func ParseEnv(getenv func(string) string) (Env, error) {
	var e Env
	var err error
	if e.Rank, err = intVar(getenv, EnvRank, 0); err != nil {
		return e, err
	}
	if e.WorldSize, err = intVar(getenv, EnvWorldSize, 1); err != nil {
		return e, err
	}
	if e.Rank >= e.WorldSize {
		return e, fmt.Errorf("%s=%d: want less than %s=%d", EnvRank, e.Rank, EnvWorldSize, e.WorldSize)
	}
	if getenv(EnvLocalRank) == "" {
		e.LocalRank = e.Rank
	} else if e.LocalRank, err = intVar(getenv, EnvLocalRank, 0); err != nil {
		return e, err
	}
	host, port := getenv(EnvMasterAddr), getenv(EnvMasterPort)
	if host == "" || port == "" {
		if e.WorldSize > 1 {
			return e, fmt.Errorf("%s and %s must be set when %s=%d", EnvMasterAddr, EnvMasterPort, EnvWorldSize, e.WorldSize)
		}
	} else {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 {
			return e, fmt.Errorf("%s=%q: want a port number 1-65535", EnvMasterPort, port)
		}
		e.Master = net.JoinHostPort(host, port)
	}
	if d := getenv(EnvDeadline); d != "" {
		e.Deadline, err = time.ParseDuration(d)
		if err != nil || e.Deadline <= 0 {
			return e, fmt.Errorf("%s=%q: want a positive duration such as 10s", EnvDeadline, d)
		}
	}
	e.Job = getenv(EnvJob)
	for _, r := range e.Job {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return e, fmt.Errorf("%s=%q: want lower-case letters, digits and '-'", EnvJob, e.Job)
		}
	}
	return e, nil
}

func intVar(getenv func(string) string, name string, minimum int) (int, error) {
	s := getenv(name)
	if s == "" {
		return 0, fmt.Errorf("%s is not set", name)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < minimum {
		return 0, fmt.Errorf("%s=%q: want an integer >= %d", name, s, minimum)
	}
	return n, nil
}
