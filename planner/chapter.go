package planner

// This file holds the chapter's worked examples as data, so the lab, the
// tests and the examples plan exactly the same thing. The expected figures
// are not here: the planners compute them and the lab compares them with
// the chapter's text.

// ABC is the chapter's first example: a (1024 B, kernels 0-2), b (512 B,
// kernel 1) and c (768 B, kernels 3-4). c may take a's storage (a's last
// read, kernel 2, is before c's write, kernel 3). With late set, b is
// instead produced by kernel 2, the kernel of a's last read, and read by
// kernel 3, where c is written: b can share with neither.
func ABC(late bool) []Temp {
	b := Temp{Name: "b", Size: 512, First: 1, Last: 1}
	if late {
		b.First, b.Last = 2, 3
	}
	return []Temp{
		{Name: "a", Size: 1024, First: 0, Last: 2},
		b,
		{Name: "c", Size: 768, First: 3, Last: 4},
	}
}

// Touching is the off-by-one case: sizes 100, 80 and 60 live at steps
// [0,1], [1,2] and [2,3] (inclusive), the half-open [0,2), [1,3), [2,4).
// The first and last touch at step 2 but never share it, so the third may
// take the first's storage: 180 bytes. A planner that reads the half-open
// end as inclusive sees all three live at step 2 and needs 240.
func Touching() []Temp {
	return []Temp{
		{Name: "p", Size: 100, First: 0, Last: 1},
		{Name: "q", Size: 80, First: 1, Last: 2},
		{Name: "r", Size: 60, First: 2, Last: 3},
	}
}

// ResidualChain is the chapter's six-op residual chain, one op per step,
// every value size bytes: x = input; a = matmul(x, W); b = bias(a);
// c = gelu(b) + x; d = norm(c); y = matmul(d, W2), y the output. x is
// loaded into the arena by op 0, so it is a temporary whose storage is free
// after its last read (op 3). With inPlace, the elementwise ops write over
// their input: bias over a, gelu+add over b.
func ResidualChain(size int64, inPlace bool) Program {
	p := Program{
		Ops: []Op{
			{Fn: "input", Out: "x", Size: size},
			{Fn: "matmul", Out: "a", Size: size, In: []string{"x", "W"}},
			{Fn: "bias", Out: "b", Size: size, In: []string{"a"}},
			{Fn: "gelu+add", Out: "c", Size: size, In: []string{"b", "x"}},
			{Fn: "norm", Out: "d", Size: size, In: []string{"c"}},
			{Fn: "matmul", Out: "y", Size: size, In: []string{"d", "W2"}},
		},
		Outputs: []string{"y"},
	}
	if inPlace {
		p.Ops[2].InPlace = "a"
		p.Ops[3].InPlace = "b"
	}
	return p
}

// KiB is 1024 bytes.
const KiB = 1024

// Branched is a small graph with two branches, unequal sizes, a value
// retained for the backward pass, a view, and a late consumer: x feeds a
// wide branch (conv, relu, pool) and a narrow one (1x1 conv, gelu); the
// pooled p is read once more, through a view, by the head at the very end.
// With inPlace, gelu writes over its input and add over one of its inputs.
func Branched(inPlace bool) Program {
	p := Program{
		Ops: []Op{
			{Fn: "input", Out: "x", Size: 48 * KiB},
			{Fn: "conv", Out: "h", Size: 96 * KiB, In: []string{"x", "W1"}},
			{Fn: "relu", Out: "r", Size: 96 * KiB, In: []string{"h"}},
			{Fn: "pool", Out: "p", Size: 24 * KiB, In: []string{"r"}},
			{Fn: "conv1x1", Out: "s", Size: 64 * KiB, In: []string{"x", "W2"}},
			{Fn: "gelu", Out: "t", Size: 64 * KiB, In: []string{"s"}},
			{Fn: "upsample", Out: "q", Size: 64 * KiB, In: []string{"p"}},
			{Fn: "add", Out: "u", Size: 64 * KiB, In: []string{"t", "q"}},
			{Fn: "flatten", Out: "f", In: []string{"p"}, View: true},
			{Fn: "head", Out: "y", Size: 40 * KiB, In: []string{"u", "f", "W3"}},
		},
		Inputs:   []string{"x"},
		Outputs:  []string{"y"},
		Retained: []string{"r"},
	}
	if inPlace {
		p.Ops[5].InPlace = "s"
		p.Ops[7].InPlace = "t"
	}
	return p
}
