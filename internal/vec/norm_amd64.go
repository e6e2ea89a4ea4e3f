//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/norm . -out ../../norm_amd64.s -stubs ../../norm_amd64_stubs.go -pkg vec

// normAVX2 reports whether the LayerNorm row primitives (norm.go) run
// their AVX2 kernels (norm_amd64.s). x/sys/cpu reports AVX2 only when the
// OS saves the YMM registers. Tests clear it to run the fallbacks through
// the public API.
var normAVX2 = cpu.X86.HasAVX2
