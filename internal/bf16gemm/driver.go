package bf16gemm

import (
	"sync"

	"gptlab/internal/par"
)

// tileFunc computes an mr×nr tile of C from an A panel and a B panel of
// the kernel's layouts over pairs depth pairs: C = A·B, or C += A·B when
// acc; C's rows are ldc elements apart.
type tileFunc func(pairs int, a, b *uint16, c *float32, ldc int, acc bool)

// stripFunc computes panels mr×nr tiles of C side by side from one A
// panel and as many consecutive B panels, bstride elements apart: tile q
// is tileFunc's on B panel q, into C's columns [q*nr, (q+1)*nr).
type stripFunc func(pairs int, a, b *uint16, bstride int, c *float32, ldc, panels int, acc bool)

// kernel is a packed microkernel and the panel layouts it reads.
type kernel struct {
	name   string
	mr, nr int
	step   int // the depth is padded to a multiple of step (even)
	// aRows: A panels hold mr rows of kp values (row-major, the AMX
	// tiles' rows); otherwise pairs of mr rows (dword p*mr+i holds
	// A(i,2p), A(i,2p+1)). B panels always hold pairs of nr columns
	// (dword p*nr+j holds B(2p,j), B(2p+1,j)).
	aRows bool
	tile  tileFunc
	// strip, if set, runs a row panel's full tiles in one call (the AMX
	// kernel: its tile configuration is loaded once a strip, not a tile).
	strip stripFunc
	// inPlace, if set, is tile reading A where it is stored (inPlaceFunc):
	// a row-major A whose pairs are adjacent in its rows needs no panel.
	inPlace inPlaceFunc
}

// tileA runs kern's tile over pairs pairs on A at a: its packed panel
// (lda 0) or, in place, a row-major A's rows lda elements apart.
func (kern *kernel) tileA(pairs int, a *uint16, lda int, b *uint16, c *float32, ldc int) {
	if lda == 0 {
		kern.tile(pairs, a, b, c, ldc, false)
		return
	}
	kern.inPlace(pairs, a, 2*lda, 4, b, c, ldc, false)
}

// inPlaceFunc is a tileFunc reading A in place: A(i, pair p) is the
// dword at byte offset i*rs + p*ps from a.
type inPlaceFunc func(pairs int, a *uint16, rs, ps int, b *uint16, c *float32, ldc int, acc bool)

// stripKernel is a kernel whose tile is its strip of one panel.
func stripKernel(name string, mr, nr, step int, aRows bool, strip stripFunc) *kernel {
	tile := func(pairs int, a, b *uint16, c *float32, ldc int, acc bool) {
		strip(pairs, a, b, 0, c, ldc, 1, acc)
	}
	return &kernel{name: name, mr: mr, nr: nr, step: step, aRows: aRows, tile: tile, strip: strip}
}

// The VDPBF16PS kernel's tile (asm: genDot).
const dotMR, dotNR = 12, 32

// scratch holds one goroutine's packed A panel and edge tile.
type scratch struct {
	a []uint16
	t []float32
}

var (
	scratchPool = sync.Pool{New: func() any { return new(scratch) }}
	bPool       = sync.Pool{New: func() any { return new([]uint16) }}
	jobPool     = sync.Pool{New: func() any { return new(job) }}
)

// grow returns s with at least n elements (contents undefined).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// job is one packed product: op(B) packed whole, and the row panels cut
// into parts of per panels each.
type job struct {
	kern      *kernel
	o         operands
	bp        []uint16
	kp, pairs int
	rowPanels int
	per       int
}

// partsPerThread is how many parts a split product is cut into per
// goroutine: parts are claimed as they come (par.Loop), so a goroutine
// that another process holds back leaves its later parts to the others.
const partsPerThread = 4

// run computes C = op(A)·op(B) with kern on t goroutines: op(B) is packed
// once, whole, its panels shared out among the goroutines; then each part
// is a block of row panels, and whoever runs it packs each A panel and
// runs the kernel across every column panel (the A panel stays in L1, the
// packed B streams from L2). Every element is computed by one kernel call
// whatever t is, so the split does not change the results.
func run(kern *kernel, o operands, t int) {
	kp := (o.k + kern.step - 1) / kern.step * kern.step
	nPanels := (o.n + kern.nr - 1) / kern.nr
	bp := bPool.Get().(*[]uint16)
	*bp = grow(*bp, nPanels*kp*kern.nr)
	j := job{kern: kern, o: o, bp: *bp, kp: kp, pairs: kp / 2, rowPanels: (o.m + kern.mr - 1) / kern.mr}
	t = max(1, min(t, j.rowPanels))
	if t == 1 {
		packB(kern, o, *bp, kp)
		j.per = j.rowPanels
		j.RunChunk(0)
	} else {
		jp := jobPool.Get().(*job) // the goroutines share it (Loop returns when they are done with it)
		*jp = j
		// B's panels in t blocks of adjacent ones: each goroutine reads
		// its own columns of B's stored rows (a panel a chunk had both
		// cores pull every row of an untransposed B: 0.8x on dW's shapes).
		// Serial, the packing took a fifth of a 2-thread product.
		jp.per = (nPanels + t - 1) / t
		par.Loop((*bPanels)(jp), (nPanels+jp.per-1)/jp.per, t)
		parts := min(j.rowPanels, t*partsPerThread)
		jp.per = (j.rowPanels + parts - 1) / parts
		par.Loop(jp, (j.rowPanels+jp.per-1)/jp.per, t)
		*jp = job{} // hold no operands in the pool
		jobPool.Put(jp)
	}
	bPool.Put(bp)
}

// bPanels packs op(B)'s panels of a split product, per a chunk.
type bPanels job

// RunChunk packs B's panels of chunk q.
func (b *bPanels) RunChunk(q int) {
	for p := q * b.per; p < min((b.o.n+b.kern.nr-1)/b.kern.nr, (q+1)*b.per); p++ {
		packBPanel(b.kern, b.o, b.bp, b.kp, p)
	}
}

// RunChunk computes the row panels of part q.
func (j *job) RunChunk(q int) {
	s := scratchPool.Get().(*scratch)
	s.a = grow(s.a, j.kern.mr*j.kp)
	s.t = grow(s.t, j.kern.mr*j.kern.nr)
	for rp := q * j.per; rp < min(j.rowPanels, (q+1)*j.per); rp++ {
		rowPanel(j.kern, j.o, j.bp, j.kp, j.pairs, rp*j.kern.mr, s)
	}
	scratchPool.Put(s)
}

// rowPanel computes rows [i0, i0+mr) of C (those that exist). A full
// panel of a row-major A of even depth is read where it is stored by a
// kernel that can (inPlace: the same products in the same order as on
// its packed panel, so the same bits); any other is packed.
func rowPanel(kern *kernel, o operands, bp []uint16, kp, pairs, i0 int, s *scratch) {
	mr, nr := kern.mr, kern.nr
	rows := min(mr, o.m-i0)
	a, lda := &s.a[0], 0 // A's panel, or A in place
	if kern.inPlace != nil && !o.aT && rows == mr && kp == o.k {
		a, lda = &o.a[i0*o.lda], o.lda
	} else {
		packA(kern, o, s.a, kp, i0)
	}
	j0 := 0
	if full := o.n / nr; kern.strip != nil && rows == mr && full > 0 {
		kern.strip(pairs, &s.a[0], &bp[0], kp*nr, &o.c[i0*o.ldc], o.ldc, full, false)
		j0 = full * nr
	}
	for ; j0 < o.n; j0 += nr {
		kern.tileC(pairs, a, lda, &bp[(j0/nr)*kp*nr], o, i0, j0, rows, s.t)
	}
}

// tileC computes C's tile at row i0, column j0 (rows rows, up to nr
// columns) from A at a (tileA) and a B panel: in C where the tile is
// whole, else in the edge tile t and copied.
func (kern *kernel) tileC(pairs int, a *uint16, lda int, panel *uint16, o operands, i0, j0, rows int, t []float32) {
	cols := min(kern.nr, o.n-j0)
	if rows == kern.mr && cols == kern.nr {
		kern.tileA(pairs, a, lda, panel, &o.c[i0*o.ldc+j0], o.ldc)
		return
	}
	kern.tileA(pairs, a, lda, panel, &t[0], kern.nr)
	for i := range rows {
		copy(o.c[(i0+i)*o.ldc+j0:][:cols], t[i*kern.nr:][:cols])
	}
}
