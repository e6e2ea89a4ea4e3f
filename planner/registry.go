package planner

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Algorithm is a placement algorithm known by name.
type Algorithm struct {
	Name  string // as given to --algo
	Short string // one line: what it does
	// Place returns offsets for every buffer of a valid Problem. It may
	// assume p.Validate() == nil; Plan checks that first.
	Place func(ctx context.Context, p Problem) (Plan, error)
}

// algorithms holds the registered algorithms in registration order. The
// three of this package are set here, before any init runs, so they come
// first in a fixed order; others (the search planner) add themselves from
// init.
var algorithms = []Algorithm{independentAlgorithm, bestFitAlgorithm, greedyBySizeAlgorithm}

// Register adds an algorithm. It panics on an empty or duplicate name: that
// is a programming error found at start-up.
func Register(a Algorithm) {
	if a.Name == "" || a.Place == nil {
		panic("planner: Register needs a name and a Place function")
	}
	for _, b := range algorithms {
		if b.Name == a.Name {
			panic("planner: algorithm registered twice: " + a.Name)
		}
	}
	algorithms = append(algorithms, a)
}

// Algorithms returns every registered algorithm, in registration order.
func Algorithms() []Algorithm { return append([]Algorithm(nil), algorithms...) }

// Lookup returns the algorithm with that name.
func Lookup(name string) (Algorithm, error) {
	for _, a := range algorithms {
		if a.Name == name {
			return a, nil
		}
	}
	names := make([]string, len(algorithms))
	for i, a := range algorithms {
		names[i] = a.Name
	}
	sort.Strings(names)
	return Algorithm{}, fmt.Errorf("unknown planner %q (known: %s)", name, strings.Join(names, ", "))
}

// Run validates p, places it with a and checks the plan with Check, so a
// caller never receives a plan that fails verification: it gets an error.
func (a Algorithm) Run(ctx context.Context, p Problem) (Plan, error) {
	if err := p.Validate(); err != nil {
		return Plan{}, err
	}
	pl, err := a.Place(ctx, p)
	if err != nil {
		return Plan{}, fmt.Errorf("%s: %w", a.Name, err)
	}
	if err := Check(p, pl); err != nil {
		return Plan{}, fmt.Errorf("%s: plan fails verification: %w", a.Name, err)
	}
	return pl, nil
}
