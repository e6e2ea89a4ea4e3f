//go:build amd64 && !purego

package vec

import "golang.org/x/sys/cpu"

//go:generate go run -C asm/dropout . -out ../../dropout_amd64.s -stubs ../../dropout_amd64_stubs.go -pkg vec

// dropoutImpls lists the kernels of DropoutMul this CPU supports, best
// first: AVX-512F with DQ (VPMULLQ), AVX2, then the Go loop. They give
// the Go loop's bits (TestDropoutMulImpls).
func dropoutImpls() []dropoutImpl {
	ims := []dropoutImpl{{name: "go"}}
	if cpu.X86.HasAVX2 {
		ims = append([]dropoutImpl{{name: "avx2", width: 8, kernel: dropoutAVX2}}, ims...)
	}
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ {
		ims = append([]dropoutImpl{{name: "avx512", width: 16, kernel: dropoutAVX512}}, ims...)
	}
	return ims
}
