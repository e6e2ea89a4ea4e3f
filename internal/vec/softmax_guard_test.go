//go:build linux

package vec

import (
	"runtime/debug"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// guardedRow returns n float32 that end where a page ends, the next page
// mapped with no access: a kernel that touched an element past the row
// would fault. The mapping is unmapped at the end of the test.
func guardedRow(t *testing.T, n int) []float32 {
	t.Helper()
	page := syscall.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, 2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[page:], syscall.PROT_NONE); err != nil {
		t.Skipf("mprotect: %v", err)
	}
	all := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), page/4)
	row := all[len(all)-n:]
	if !faults(unsafe.Add(unsafe.Pointer(&row[n-1]), 4)) { // the negative control
		t.Fatal("reading the float32 past the row did not fault: the guard page guards nothing")
	}
	return row
}

// faults reports whether reading the float32 at p faults.
func faults(p unsafe.Pointer) (fault bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { fault = recover() != nil }()
	_ = *(*float32)(p)
	return false
}

// TestRowKernelsStopAtTheRow runs ExpSum, Max and Scale on rows that end
// at a page with no access behind them: the masked last vectors must not
// read or write past the row.
func TestRowKernelsStopAtTheRow(t *testing.T) {
	for _, impl := range smImpls() {
		for n := 1; n <= 33; n++ {
			t.Run(impl+"/"+strconv.Itoa(n), func(t *testing.T) {
				x, y := guardedRow(t, n), guardedRow(t, n)
				copy(x, smData(uint64(n)+70, n))
				want := make([]float32, n)
				var s, sw float64
				var m, mw float32
				smWith("go", func() { sw, mw = ExpSum(want, x, 0.5, 1), Max(x) })
				smWith(impl, func() { s, m = ExpSum(y, x, 0.5, 1), Max(x) })
				checkSame(t, "ExpSum", y, want)
				if s != sw || m != mw {
					t.Errorf("sum %v max %v, want %v and %v", s, m, sw, mw)
				}
				smWith(impl, func() { Scale(y, x, 3) })
				smWith("go", func() { Scale(want, x, 3) })
				checkSame(t, "Scale", y, want)
			})
		}
	}
}
