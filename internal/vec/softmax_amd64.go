//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/softmax . -out ../../softmax_amd64.s -stubs ../../softmax_amd64_stubs.go -pkg vec

// softmaxAVX2 reports whether the softmax row primitives (softmax.go) run
// their AVX2+FMA kernels (softmax_amd64.s). x/sys/cpu reports AVX2 only
// when the OS saves the YMM registers. Tests clear it to run the
// fallbacks through the public API.
var softmaxAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA
