package planner

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// RandomSpec describes random lifetimes: N buffers starting uniformly in
// [0, Horizon), each living 1 to MaxLife steps, with sizes log-uniform in
// [MinSize, MaxSize].
type RandomSpec struct {
	N                int
	Horizon, MaxLife int64
	MinSize, MaxSize int64
}

// Random returns the buffers of spec drawn from seed: the same seed gives
// the same buffers.
func Random(seed uint64, spec RandomSpec) []Buffer {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	lo, hi := math.Log(float64(spec.MinSize)), math.Log(float64(spec.MaxSize))
	bufs := make([]Buffer, spec.N)
	for i := range bufs {
		start := rng.Int64N(max(spec.Horizon, 1))
		size := int64(math.Exp(lo + (hi-lo)*rng.Float64()))
		bufs[i] = Buffer{
			ID:    fmt.Sprint(i),
			Start: start,
			End:   start + 1 + rng.Int64N(max(spec.MaxLife, 1)),
			Size:  min(max(size, spec.MinSize), spec.MaxSize),
		}
	}
	return bufs
}

// ScaleSpec is the random workload of the scale benchmarks and tests: n
// buffers starting over n/8 steps, each living 1 to 16 steps, so about 70
// are live at any step however large n is (a long schedule, not a dense
// one), 64 B to 4 KiB each.
func ScaleSpec(n int) RandomSpec {
	return RandomSpec{N: n, Horizon: int64(max(n/8, 1)), MaxLife: 16, MinSize: 64, MaxSize: 4096}
}
