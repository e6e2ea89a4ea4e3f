package planner

import "context"

var independentAlgorithm = Algorithm{
	Name:  "independent",
	Short: "each buffer its own storage, one after another: the naive sum",
	Place: placeIndependent,
}

// placeIndependent gives every buffer its own aligned storage.
func placeIndependent(ctx context.Context, p Problem) (Plan, error) {
	offs := make([]int64, len(p.Buffers))
	var at int64
	for i := range p.Buffers {
		offs[i] = at
		at += p.SizeOf(i)
	}
	return Plan{Offsets: offs, Peak: at}, nil
}
