package vec

import "strings"

// Kernel names the code the package's ops run on this machine: "avx2"
// (amd64) or "neon" (arm64) when every family (basic, column sums, GELU,
// LayerNorm, softmax, dropout) runs that build's kernels, "go" when none
// does, else each family's ("basic go, sums go, gelu neon, ..."; arm64
// has no kernels of the basic ops, the column sums or dropout; on amd64
// with AVX-512 the column sums', GELU's and softmax's are "avx512", and
// dropout's with AVX-512DQ too).
func Kernel() string {
	name := func(asm bool) string {
		if asm {
			return asmName
		}
		return "go"
	}
	basic, sums := "go", "go"
	if basicAVX2 {
		basic, sums = "avx2", "avx2"
		if accumZ {
			sums = "avx512"
		}
	}
	fam := []struct{ name, kernel string }{
		{"basic", basic}, {"sums", sums}, {"gelu", geluBest.name}, {"norm", name(normAsm)},
		{"softmax", softmaxName()}, {"dropout", dropoutBest.name},
	}
	parts := make([]string, len(fam))
	same := true
	for i, f := range fam {
		parts[i] = f.name + " " + f.kernel
		same = same && f.kernel == fam[0].kernel
	}
	if same {
		return fam[0].kernel
	}
	return strings.Join(parts, ", ")
}
