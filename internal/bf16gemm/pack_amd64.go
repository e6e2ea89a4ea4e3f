//go:build amd64 && !purego

package bf16gemm

import (
	"math"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// packAsm reports whether the panels are packed by the assembly
// (packPairRows needs AVX512BW; every CPU with AVX512_BF16 or AMX has it),
// else by the Go contracts (packgo.go).
var packAsm = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// interleaveIdx is packPairRows's two VPERMT2W tables: words 0-31 take
// column j of the even row (index j) and of the odd row (32+j) for j <
// 16, words 32-63 the same for j = 16..31.
var interleaveIdx = func() (t [64]uint16) {
	for j := range uint16(16) {
		t[2*j], t[2*j+1] = j, 32+j
		t[32+2*j], t[32+2*j+1] = 16+j, 48+j
	}
	return t
}()

// interleaveRows packs pairs that span two stored rows (pack.go), cols <=
// w <= 32.
func interleaveRows(pairs int, src []uint16, ld int, d []uint32, w, cols int) {
	if !packAsm {
		interleaveRowsGo(pairs, src, ld, d, w, cols)
		return
	}
	if pairs == 0 || cols == 0 {
		return
	}
	_ = src[(2*pairs-1)*ld+cols-1] // the assembly reads no further
	_ = d[(pairs-1)*w+cols-1]
	packPairRows(pairs, &src[0], ld, (*uint16)(unsafe.Pointer(&d[0])), w, uint32(1<<cols-1), &interleaveIdx[0])
}

// transposePairs packs pairs adjacent in stored rows (pack.go), rows <= w:
// 16 rows a call of the assembly, blocks of 16 pairs transposed in
// registers and the rest gathered.
func transposePairs(pairs int, src []uint16, ld int, d []uint32, w, rows int) {
	if !packAsm || 16*ld > math.MaxInt32 {
		transposePairsGo(pairs, src, ld, d, w, rows)
		return
	}
	if pairs == 0 || rows == 0 {
		return
	}
	_ = src[(rows-1)*ld+2*pairs-1] // the assembly reads no further
	_ = d[(pairs-1)*w+rows-1]
	blocks := pairs / 16
	for r0 := 0; r0 < rows; r0 += 16 {
		n := min(16, rows-r0)
		var offs [16]int32
		var boffs [16]int64
		for r := range offs {
			offs[r] = int32(r * ld)
			boffs[r] = int64(2 * min(r, n-1) * ld) // rows past n load row n-1 again
		}
		dst := unsafe.Pointer(&d[r0])
		if blocks > 0 {
			transposePairs16(blocks, &src[r0*ld], &boffs[0], (*uint16)(dst), w, uint16(1<<n-1))
		}
		if rest := pairs - 16*blocks; rest > 0 {
			gatherPairs(rest, &src[r0*ld+32*blocks], (*uint16)(unsafe.Pointer(&d[r0+16*blocks*w])), w, uint16(1<<n-1), &offs[0])
		}
	}
}
