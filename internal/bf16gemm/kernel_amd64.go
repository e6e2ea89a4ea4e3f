//go:build amd64 && !purego

package bf16gemm

import "golang.org/x/sys/cpu"

//go:generate go run -C asm . -out ../kernel_amd64.s -stubs ../kernel_amd64_stubs.go -pkg bf16gemm

// dotKernel returns the VDPBF16PS kernel if the CPU has AVX512_BF16 (and
// the OS saves the ZMM state: x/sys/cpu reports AVX512_BF16 only then).
func dotKernel() *kernel {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 || bf16Off() {
		return nil
	}
	return &kernel{name: "avx512bf16", mr: dotMR, nr: dotNR, step: 2, tile: dotTile12x32, inPlace: dotTile12x32s}
}

// amxStripFunc is the AMX kernel with its tile configuration bound.
func amxStripFunc(pairs int, a, b *uint16, bstride int, c *float32, ldc, panels int, acc bool) {
	// A panels are row-major with kp = 2*pairs values a row.
	amxStrip32x32(&amxConfig[0], pairs, a, 2*pairs, b, bstride, c, ldc, panels, acc)
}

// amxConfig is amxStrip32x32's tile configuration.
var amxConfig = tileConfig()

// amxHardware reports whether the CPU has AMX-TILE and AMX-BF16 and the OS
// enables the tile state in XCR0 (bits 17 XTILECFG and 18 XTILEDATA), or
// why not.
func amxHardware() (bool, string) {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return false, "the CPU reports no AMX-TILE/AMX-BF16 (CPUID)"
	}
	if !cpu.X86.HasOSXSAVE {
		return false, "the OS does not enable XSAVE"
	}
	if x := xgetbv0(); x&(3<<17) != 3<<17 {
		return false, "the OS does not enable the AMX tile state (XCR0 bits 17-18 clear)"
	}
	return true, ""
}
