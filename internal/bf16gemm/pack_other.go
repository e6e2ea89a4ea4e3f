//go:build !amd64 || purego

package bf16gemm

// packAsm is false: this build packs the panels in Go.
var packAsm = false

// interleaveRows packs pairs that span two stored rows (pack.go).
func interleaveRows(pairs int, src []uint16, ld int, d []uint32, w, cols int) {
	interleaveRowsGo(pairs, src, ld, d, w, cols)
}

// transposePairs packs pairs adjacent in stored rows (pack.go).
func transposePairs(pairs int, src []uint16, ld int, d []uint32, w, rows int) {
	transposePairsGo(pairs, src, ld, d, w, rows)
}
