package crc32c

import (
	"fmt"
	"hash/crc32"
	"os"
	"strings"
	"sync/atomic"
)

var table = crc32.MakeTable(crc32.Castagnoli)

// minFold is the smallest input a folding kernel takes: the two break
// even at about 768 bytes on the Xeon here (the ZMM kernel with its
// finish 47 ns, hash/crc32 50 ns), and the kernel wins from 1 KiB on.
const minFold = 1024

// A kernel folds whole blocks of its size from a CRC register to a 128-bit
// remainder (see foldGo, its contract).
type kernel struct {
	name  string
	lanes int // 16-byte lanes a register: the block is 64·lanes bytes
	fold  func(r uint32, p []byte) (lo, hi uint64)
}

// kernels lists the folding kernels this CPU and OS run, best first
// (archKernels); active holds the one Update uses, nil for hash/crc32
// alone (atomic: SetKernel may run while other goroutines checksum).
var (
	kernels = archKernels()
	active  atomic.Pointer[kernel]
)

func init() { active.Store(fromEnv()) }

// fromEnv is the kernel GPTLAB_CRC32C names (for comparisons:
// GPTLAB_CRC32C=hash/crc32), else the best one.
func fromEnv() *kernel {
	name := os.Getenv("GPTLAB_CRC32C")
	if name == "" {
		return first(kernels)
	}
	k, err := find(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gptlab: GPTLAB_CRC32C: %v; using %s\n", err, nameOf(first(kernels)))
		return first(kernels)
	}
	return k
}

// find is the kernel called name ("hash/crc32": none).
func find(name string) (*kernel, error) {
	if name == "hash/crc32" {
		return nil, nil
	}
	names := []string{"hash/crc32"}
	for _, k := range kernels {
		if k.name == name {
			return k, nil
		}
		names = append(names, k.name)
	}
	return nil, fmt.Errorf("no kernel %q on this CPU (it has %s)", name, strings.Join(names, ", "))
}

// SetKernel makes Update use the kernel called name: one of Kernels().
func SetKernel(name string) error {
	k, err := find(name)
	if err != nil {
		return err
	}
	active.Store(k)
	return nil
}

// Kernels names the paths this CPU runs, best first; hash/crc32 is last.
func Kernels() []string {
	var names []string
	for _, k := range kernels {
		names = append(names, k.name)
	}
	return append(names, "hash/crc32")
}

func first(ks []*kernel) *kernel {
	if len(ks) == 0 {
		return nil
	}
	return ks[0]
}

// Update returns the CRC-32C of p continued from crc, as
// crc32.Update(crc, crc32.MakeTable(crc32.Castagnoli), p) does.
func Update(crc uint32, p []byte) uint32 {
	k := active.Load()
	if k == nil || len(p) < minFold {
		return crc32.Update(crc, table, p)
	}
	n := len(p) - len(p)%(64*k.lanes)
	lo, hi := k.fold(^crc, p[:n])
	return crc32.Update(finish(lo, hi), table, p[n:])
}

// finish turns the folded 128-bit remainder into a checksum to continue
// from: the remainder is congruent to the folded data modulo P, aligned
// at its end, so the CRC register of the data is that of these 16 bytes
// run from a zero register (byte by byte through the table: 16 lookups).
// Checksums are the inverted register, as in hash/crc32.
func finish(lo, hi uint64) uint32 {
	reg := uint32(0)
	for _, q := range [2]uint64{lo, hi} {
		for i := 0; i < 64; i += 8 {
			reg = table[byte(reg)^byte(q>>i)] ^ reg>>8
		}
	}
	return ^reg
}

// Kernel names the code computing checksums of large inputs now.
func Kernel() string { return nameOf(active.Load()) }

func nameOf(k *kernel) string {
	if k == nil {
		return "hash/crc32"
	}
	return k.name
}
