package planner_test

import (
	"context"
	"fmt"

	"gptlab/planner"
)

func ExampleLowerBound() {
	bufs := []planner.Buffer{
		{ID: "a", Start: 0, End: 3, Size: 1024},
		{ID: "b", Start: 1, End: 2, Size: 512},
		{ID: "c", Start: 3, End: 5, Size: 768}, // starts as a ends: never live together
	}
	fmt.Println(planner.LowerBound(bufs))
	// Output: 1536
}

// Planning the chapter's a/b/c example: c takes a's storage.
func Example() {
	p, err := planner.Lower(planner.ABC(false), 1)
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"independent", "best-fit"} {
		a, _ := planner.Lookup(name)
		plan, err := a.Run(context.Background(), p) // placed and verified
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: peak %d, offsets %v\n", name, plan.Peak, plan.Offsets)
	}
	// Output:
	// independent: peak 2304, offsets [0 1024 1536]
	// best-fit: peak 1536, offsets [0 1024 0]
}

func ExampleProgram_Legal() {
	p := planner.ResidualChain(64<<20, false)
	fmt.Println(p.Legal(2, "a")) // bias over a: its last reader
	fmt.Println(p.Legal(1, "x")) // matmul over x: gelu+add reads x later
	// Output:
	// <nil>
	// in-place refused: op 1 (matmul) writing "a" over "x": "x" is read again by op 3 (gelu+add)
}

func ExampleCheck() {
	p := planner.Problem{Alignment: 1, Buffers: []planner.Buffer{
		{ID: "a", Start: 0, End: 2, Size: 100},
		{ID: "b", Start: 1, End: 3, Size: 100},
	}}
	bad := planner.Plan{Offsets: []int64{0, 50}, Peak: 150}
	fmt.Println(planner.Check(p, bad))
	// Output:
	// bad plan: buffers "a" (bytes [0, 100), steps [0, 2)) and "b" (bytes [50, 150), steps [1, 3)) are both live at step 1 and share bytes [50, 100)
}

func ExampleProgram_Temps() {
	temps, _ := planner.ResidualChain(64, true).Temps()
	for _, t := range temps {
		fmt.Printf("%s [%d, %d] %v\n", t.Name, t.First, t.Last, t.Kind)
	}
	// Output:
	// x [0, 3] temporary
	// a/b/c [1, 4] temporary
	// d [4, 5] temporary
	// y [5, 5] output
}
