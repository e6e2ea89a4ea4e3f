package precision

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

// The exhaustive tests run every float32 bit pattern through the scalar
// code, an independent reference and every vector kernel this machine
// runs (and the Go emulations of the kernels it may lack), in chunks
// spread over runtime.NumCPU() goroutines. With -short they take every
// 61st chunk.

// chunkBits is the log2 of the values per chunk.
const chunkBits = 16

// report collects mismatches per check, keeping a few examples.
type report struct {
	mu    sync.Mutex
	count map[string]int
	ex    map[string][]string
}

func newReport() *report { return &report{count: map[string]int{}, ex: map[string][]string{}} }

func (r *report) add(check string, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[check]++
	if len(r.ex[check]) < 4 {
		r.ex[check] = append(r.ex[check], fmt.Sprintf(format, args...))
	}
}

func (r *report) fail(t *testing.T) {
	t.Helper()
	for c, n := range r.count {
		t.Errorf("%s: %d mismatches, e.g. %v", c, n, r.ex[c])
	}
}

// forAllFloat32 calls check(src) for chunks of consecutive float32 bit
// patterns covering all 2^32 (every 61st chunk with -short), each worker
// with its own scratch from newScratch.
func forAllFloat32[S any](t *testing.T, newScratch func() S, check func(src []float32, s S)) {
	t.Helper()
	stride := uint32(1)
	if testing.Short() {
		stride = 61
	}
	const chunks = 1 << (32 - chunkBits)
	var next sync.Mutex
	c := uint32(0)
	claim := func() (uint32, bool) {
		next.Lock()
		defer next.Unlock()
		if c >= chunks {
			return 0, false
		}
		v := c
		c += stride
		return v, true
	}
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := make([]float32, 1<<chunkBits)
			s := newScratch()
			for {
				ch, ok := claim()
				if !ok {
					return
				}
				base := ch << chunkBits
				for i := range src {
					src[i] = math.Float32frombits(base + uint32(i))
				}
				check(src, s)
			}
		}()
	}
	wg.Wait()
}

// u16Bytes views a []uint16 as bytes (for bytes.Equal's vector compare).
func u16Bytes(s []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 2*len(s))
}

// compare reports each i where got[i] != want[i] under check.
func compare(r *report, check string, src []float32, got, want []uint16) {
	if bytes.Equal(u16Bytes(got), u16Bytes(want)) {
		return
	}
	for i := range got {
		if got[i] != want[i] {
			r.add(check, "%#08x: got %#04x, want %#04x", math.Float32bits(src[i]), got[i], want[i])
		}
	}
}

// saturated returns the saturating result from the overflowing one h for
// input x: a finite x that became ±Inf (bits inf) becomes ±max.
func saturated(h uint16, x float32, inf, max uint16) uint16 {
	if h&0x7FFF == inf && math.Float32bits(x)&0x7FFFFFFF != 0x7F800000 {
		return h&0x8000 | max
	}
	return h
}

// narrowScratch is a worker's buffers for a narrowing pass.
type narrowScratch struct{ want, wantSat, got, emu []uint16 }

func newNarrowScratch() narrowScratch {
	n := 1 << chunkBits
	return narrowScratch{make([]uint16, n), make([]uint16, n), make([]uint16, n), make([]uint16, n)}
}

// setWant fills s.want with ref's results for src and s.wantSat with their
// saturating derivation (inf and max are the format's Inf and largest
// finite bits). ref is called directly, not through a func value, by the
// two instantiations (fp16Ref, bf16Ref): the exhaustive loops are hot.
func setWant[R interface{ ref(float32) uint16 }](s narrowScratch, src []float32, r R, inf, max uint16) {
	for i, x := range src {
		w := r.ref(x)
		s.want[i] = w
		s.wantSat[i] = saturated(w, x, inf, max)
	}
}

// checkKernels runs each kernel of ks on the chunk, plain and saturating,
// against s.want and s.wantSat.
func checkKernels(r *report, ks []encKernel, src []float32, s narrowScratch) {
	for _, k := range ks {
		k.fn(&s.got[0], &src[0], len(src), false)
		compare(r, "kernel "+k.name, src, s.got, s.want)
		k.fn(&s.got[0], &src[0], len(src), true)
		compare(r, "kernel "+k.name+" (saturating)", src, s.got, s.wantSat)
	}
}

// hasKernel reports whether ks has a kernel called name.
func hasKernel(ks []encKernel, name string) bool {
	for _, k := range ks {
		if k.name == name {
			return true
		}
	}
	return false
}

// kernelNames lists the names of ks.
func encKernelNames(ks []encKernel) []string {
	var names []string
	for _, k := range ks {
		names = append(names, k.name)
	}
	return names
}
