package bf16gemm

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"gptlab/precision"
)

// This file emulates in Go the contracts of the two hardware kernels, as
// the Intel SDM defines their instructions, so the driver is tested
// through them on any machine and the real kernels are compared with them
// where the hardware is there.

// daz returns x, or a zero of its sign if x is subnormal ("input denormals
// are treated as zero").
func daz(x float32) float32 {
	if b := math.Float32bits(x); b&0x7F800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return x
}

// fmaFTZ returns c + a·b rounded once to float32, to nearest even, with
// denormal inputs as zero and a tiny result flushed to a zero of its sign
// (tininess after rounding, as x86 detects it): the FMA of VDPBF16PS and
// TDPBF16PS. The product of two bf16 values is exact in float64 and the
// float64 sum of two 24-bit numbers rounds to float32 correctly (53 >=
// 2·24+2).
func fmaFTZ(a, b, c float32) float32 {
	x := float64(daz(c)) + float64(daz(a))*float64(daz(b))
	if x != 0 && math.Abs(x) < 0x1p-126-0x1p-151 {
		return float32(math.Copysign(0, x))
	}
	return float32(x)
}

// addFTZ returns a + b with denormal inputs as zero and tiny results
// flushed (TDPBF16PS's horizontal sum and accumulation).
func addFTZ(a, b float32) float32 { return fmaFTZ(a, 1, b) }

// bf returns the bf16 in the low (h = 0) or high (h = 1) half of dword d.
func bf(d uint32, h int) float32 { return precision.FromBF16(uint16(d >> (16 * h))) }

// vdpbf16ps is one lane of VDPBF16PS (SDM): the odd (high) products
// first, then the even (low), each an FMA into the accumulator.
func vdpbf16ps(acc float32, a, b uint32) float32 {
	acc = fmaFTZ(bf(a, 1), bf(b, 1), acc)
	return fmaFTZ(bf(a, 0), bf(b, 0), acc)
}

// dwords views n dwords at p.
func dwords(p *uint16, n int) []uint32 { return unsafe.Slice((*uint32)(unsafe.Pointer(p)), n) }

// emuDotTile is dotTile12x32's contract: for each of the 12×32 outputs,
// VDPBF16PS over the pairs in order, from C (acc) or +0 (the in-place
// contract on the packed panel: row i's pair p at dword p*12+i).
func emuDotTile(pairs int, a, b *uint16, c *float32, ldc int, acc bool) {
	emuDotTileInPlace(pairs, a, 4, 4*dotMR, b, c, ldc, acc)
}

// emuDotTileInPlace is dotTile12x32s's contract: for each of the 12×32
// outputs, VDPBF16PS over the pairs in order, from C (acc) or +0, with
// A(i, pair p) the dword at byte offset i*rs + p*ps from a.
func emuDotTileInPlace(pairs int, a *uint16, rs, ps int, b *uint16, c *float32, ldc int, acc bool) {
	bs := dwords(b, pairs*dotNR)
	cs := unsafe.Slice(c, (dotMR-1)*ldc+dotNR)
	for i := range dotMR {
		for j := range dotNR {
			v := float32(0)
			if acc {
				v = cs[i*ldc+j]
			}
			for p := range pairs {
				v = vdpbf16ps(v, *(*uint32)(unsafe.Add(unsafe.Pointer(a), i*rs+p*ps)), bs[p*dotNR+j])
			}
			cs[i*ldc+j] = v
		}
	}
}

// emuDotKernel is the VDPBF16PS kernel family with the emulated tiles.
func emuDotKernel() *kernel {
	return &kernel{name: "emu-avx512bf16", mr: dotMR, nr: dotNR, step: 2, tile: emuDotTile, inPlace: emuDotTileInPlace}
}

// amx is an emulated AMX unit: the tile configuration and eight tiles of
// up to 16 rows of 64 bytes.
type amx struct {
	configured bool
	rows       [8]int
	colsb      [8]int
	tile       [8][16][64]byte
}

// ldtilecfg loads a 64-byte configuration (palette 1: byte 0 the palette,
// byte 1 start_row, bytes 16-31 colsb of tiles 0-7, bytes 48-55 their
// rows); like the hardware it rejects a bad one (#GP) and zeroes the tiles.
func (m *amx) ldtilecfg(cfg []byte) {
	if cfg[0] != 1 || cfg[1] != 0 {
		panic(fmt.Sprintf("amx: ldtilecfg palette %d start_row %d", cfg[0], cfg[1]))
	}
	for t := range 8 {
		m.colsb[t] = int(binary.LittleEndian.Uint16(cfg[16+2*t:]))
		m.rows[t] = int(cfg[48+t])
		if m.rows[t] > 16 || m.colsb[t] > 64 || m.colsb[t]%4 != 0 {
			panic(fmt.Sprintf("amx: tile %d configured %d rows × %d bytes", t, m.rows[t], m.colsb[t]))
		}
	}
	m.tile = [8][16][64]byte{}
	m.configured = true
}

func (m *amx) check(t int) {
	if !m.configured || m.rows[t] == 0 {
		panic(fmt.Sprintf("amx: tile %d used unconfigured", t))
	}
}

// tileloadd loads tile t's rows from mem, stride bytes apart, zeroing the
// bytes past colsb.
func (m *amx) tileloadd(t int, mem unsafe.Pointer, stride int) {
	m.check(t)
	for r := range m.rows[t] {
		src := unsafe.Slice((*byte)(unsafe.Add(mem, r*stride)), m.colsb[t])
		m.tile[t][r] = [64]byte{}
		copy(m.tile[t][r][:], src)
	}
}

// tilestored stores tile t's rows to mem, stride bytes apart.
func (m *amx) tilestored(t int, mem unsafe.Pointer, stride int) {
	m.check(t)
	for r := range m.rows[t] {
		dst := unsafe.Slice((*byte)(unsafe.Add(mem, r*stride)), m.colsb[t])
		copy(dst, m.tile[t][r][:m.colsb[t]])
	}
}

func (m *amx) tilezero(t int) {
	m.check(t)
	m.tile[t] = [16][64]byte{}
}

func (m *amx) f32(t, r, n int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(m.tile[t][r][4*n:]))
}

func (m *amx) dword(t, r, n int) uint32 { return binary.LittleEndian.Uint32(m.tile[t][r][4*n:]) }

// tdpbf16ps is TDPBF16PS tc += ta·tb as the SDM defines it: for each row
// m of tc, two float32 partial sums per output column n, of the even and
// of the odd products of the pairs k in order (each an FMA from +0), then
// tc[m][n] += (even + odd). Shapes must agree as the SDM's #UD conditions
// say.
func (m *amx) tdpbf16ps(tc, ta, tb int) {
	for _, t := range []int{tc, ta, tb} {
		m.check(t)
	}
	ks, ns := m.colsb[ta]/4, m.colsb[tc]/4
	if m.rows[ta] != m.rows[tc] || m.rows[tb] != ks || m.colsb[tb] != m.colsb[tc] {
		panic("amx: tdpbf16ps shapes disagree")
	}
	for r := range m.rows[tc] {
		even, odd := make([]float32, ns), make([]float32, ns)
		for k := range ks {
			a := m.dword(ta, r, k)
			for n := range ns {
				b := m.dword(tb, k, n)
				even[n] = fmaFTZ(bf(a, 0), bf(b, 0), even[n])
				odd[n] = fmaFTZ(bf(a, 1), bf(b, 1), odd[n])
			}
		}
		for n := range ns {
			v := addFTZ(m.f32(tc, r, n), addFTZ(even[n], odd[n]))
			binary.LittleEndian.PutUint32(m.tile[tc][r][4*n:], math.Float32bits(v))
		}
	}
}

// emuAMXStrip runs amxStrip32x32's instruction sequence (asm: genAMX) on
// an emulated unit: the configuration loaded once, then for each tile of
// the strip the C tiles loaded or zeroed, per block of 16 pairs the A and
// B tiles loaded and four TDPBF16PS, the C tiles stored. broken, if set,
// swaps the two B tiles (a negative control for the self-test).
func emuAMXStrip(cfg []byte, broken bool) stripFunc {
	return func(pairs int, a, b *uint16, bstride int, c *float32, ldc, panels int, acc bool) {
		var m amx
		m.ldtilecfg(cfg)
		lda := 2 * pairs // elements between A's rows
		for q := range panels {
			cp := unsafe.Add(unsafe.Pointer(c), 4*32*q)
			cTiles := []unsafe.Pointer{cp, unsafe.Add(cp, 64), unsafe.Add(cp, 16*4*ldc), unsafe.Add(cp, 16*4*ldc+64)}
			for t, p := range cTiles {
				if acc {
					m.tileloadd(t, p, 4*ldc)
				} else {
					m.tilezero(t)
				}
			}
			ap, bp := unsafe.Pointer(a), unsafe.Add(unsafe.Pointer(b), 2*bstride*q)
			b6, b7 := 6, 7
			if broken {
				b6, b7 = 7, 6
			}
			for d := 0; d < pairs/16; d++ { // depth blocks of 16 pairs
				m.tileloadd(4, unsafe.Add(ap, 64*d), 2*lda)
				m.tileloadd(5, unsafe.Add(ap, 64*d+16*2*lda), 2*lda)
				m.tileloadd(b6, unsafe.Add(bp, 2048*d), 128)
				m.tileloadd(b7, unsafe.Add(bp, 2048*d+64), 128)
				m.tdpbf16ps(0, 4, 6)
				m.tdpbf16ps(1, 4, 7)
				m.tdpbf16ps(2, 5, 6)
				m.tdpbf16ps(3, 5, 7)
			}
			for t, p := range cTiles {
				m.tilestored(t, p, 4*ldc)
			}
		}
	}
}

// emuAMXKernel is the AMX kernel family with the emulated tile sequence
// and the package's tile configuration.
func emuAMXKernel(broken bool) *kernel {
	cfg := tileConfig()
	return stripKernel("emu-amx", 32, 32, 32, true, emuAMXStrip(cfg[:], broken))
}
