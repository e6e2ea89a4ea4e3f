package vec

import "strings"

// Kernel names the code the package's ops run on this machine: "avx2"
// when every family (basic, GELU, LayerNorm, softmax) runs its AVX2
// kernels, "go" when none does, else each family's.
func Kernel() string {
	fam := []struct {
		name string
		avx2 bool
	}{{"basic", basicAVX2}, {"gelu", geluBest.name == "avx2"}, {"norm", normAVX2}, {"softmax", softmaxAVX2}}
	all, none := true, true
	var parts []string
	for _, f := range fam {
		all, none = all && f.avx2, none && !f.avx2
		k := "go"
		if f.avx2 {
			k = "avx2"
		}
		parts = append(parts, f.name+" "+k)
	}
	switch {
	case all:
		return "avx2"
	case none:
		return "go"
	}
	return strings.Join(parts, ", ")
}
