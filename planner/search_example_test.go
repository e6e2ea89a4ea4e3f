package planner_test

import (
	"context"
	"errors"
	"fmt"

	"gptlab/planner"
)

// The greedy trap of search_test.go: largest-first placement needs 130
// bytes, the search finds the lower bound, 110, and proves it optimal.
func ExampleSearch() {
	p := planner.Problem{Alignment: 1, Buffers: []planner.Buffer{
		{ID: "a", Start: 2, End: 5, Size: 40},
		{ID: "b", Start: 0, End: 3, Size: 40},
		{ID: "c", Start: 2, End: 3, Size: 30},
		{ID: "d", Start: 4, End: 5, Size: 10},
		{ID: "e", Start: 1, End: 2, Size: 60},
	}}
	var st planner.SearchStats
	plan, err := planner.Search(context.Background(), p, planner.SearchOptions{Stats: &st})
	if err != nil {
		panic(err)
	}
	fmt.Println("peak", plan.Peak, "bound", st.Lower, "optimal", st.Optimal, "check", planner.Check(p, plan))

	// With a capacity below the optimum the search proves there is no fit.
	_, err = planner.Search(context.Background(), p, planner.SearchOptions{Capacity: 109})
	fmt.Println(errors.Is(err, planner.ErrNoFit))
	// Output:
	// peak 110 bound 110 optimal true check <nil>
	// true
}
