package cli

import (
	"gptlab/internal/bf16gemm"
	"gptlab/internal/crc32c"
	"gptlab/internal/qgemm"
	"gptlab/internal/vec"
	"gptlab/models"
	"gptlab/precision"
	"gptlab/reports"
)

// Every report's environment names the kernels chosen at run time on this
// machine, beside its CPU.
func init() {
	reports.NameKernel("matmul", models.BLAS)
	reports.NameKernel("elementwise", vec.Kernel)
	reports.NameKernel("fp16 casts", func() string { return encDec("fp16") })
	reports.NameKernel("bf16 casts", func() string { return encDec("bf16") })
	reports.NameKernel("scaler checks", func() string { return precision.Kernels()["check"] })
	reports.NameKernel("bf16 matmul", bf16gemm.Path)
	reports.NameKernel("bf16 attention", bf16gemm.CausalPath)
	reports.NameKernel("crc32c", crc32c.Kernel)
	reports.NameKernel("int8 matmul", qgemm.Kernels)
	reports.NameKernel("paged decode", models.PagedKernel)
}

// envError is the first bad kernel-forcing environment variable (a
// GPTLAB_BF16 that names no bf16 path or one this machine lacks): a
// command refuses to run on it (exit 2) rather than run another kernel
// than the one asked for.
func envError() error {
	return bf16gemm.EnvError()
}

// encDec is a format's conversion kernels: "avx512", or encode/decode
// where they differ ("avx512bf16/avx512").
func encDec(format string) string {
	k := precision.Kernels()
	enc, dec := k["encode_"+format], k["decode_"+format]
	if enc == dec {
		return enc
	}
	return enc + "/" + dec
}
