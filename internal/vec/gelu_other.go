//go:build !(amd64 || arm64) || purego

package vec

// geluImpls lists the implementations of GELU, best first: here only the
// pure-Go loops.
func geluImpls() []geluImpl {
	return []geluImpl{{name: "go", fwd: geluGo, grad: geluGradGo}}
}
