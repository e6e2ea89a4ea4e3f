package bf16gemm

import (
	"math/rand/v2"
	"testing"
)

// TestPackContracts holds interleaveRows and transposePairs (the assembly
// where this machine runs it, else the Go contracts themselves) to the Go
// contracts, dword for dword, on ragged widths, pair counts on both sides
// of the 16-pair blocks and strides wider than the rows: every dword the
// contract writes is the contract's, every other keeps its sentinel.
func TestPackContracts(t *testing.T) {
	if !packAsm {
		t.Log("no AVX512BW here: the Go contracts are checked against themselves")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	const sentinel = 0xDEADBEEF
	for _, c := range []struct {
		name string
		run  func(pairs int, src []uint16, ld int, d []uint32, w, n int)
		ref  func(pairs int, src []uint16, ld int, d []uint32, w, n int)
		maxW int
	}{
		{"interleaveRows", interleaveRows, interleaveRowsGo, 32},
		{"transposePairs", transposePairs, transposePairsGo, 32},
	} {
		for _, w := range []int{dotMR, dotNR} {
			for _, n := range []int{1, 5, 11, 12, 16, 17, 31, 32} {
				if n > w {
					continue
				}
				for _, pairs := range []int{0, 1, 15, 16, 17, 48, 50} {
					ld := 2*pairs + n + 3 // wider than either layout reads
					src := make([]uint16, 2*pairs*ld+n*ld+64)
					for i := range src {
						src[i] = uint16(rng.Uint32())
					}
					got := make([]uint32, max(1, pairs)*w)
					want := make([]uint32, len(got))
					for i := range got {
						got[i], want[i] = sentinel, sentinel
					}
					c.run(pairs, src, ld, got, w, n)
					c.ref(pairs, src, ld, want, w, n)
					if i := firstDiff(got, want); i >= 0 {
						t.Errorf("%s w=%d n=%d pairs=%d: dword %d (pair row %d, column %d) = %#x, want %#x",
							c.name, w, n, pairs, i, i/w, i%w, got[i], want[i])
					}
				}
			}
		}
	}
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []uint32) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
