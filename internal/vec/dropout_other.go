//go:build !amd64 || purego

package vec

// dropoutImpls lists the kernels of DropoutMul, best first: here only the
// Go loop.
func dropoutImpls() []dropoutImpl { return []dropoutImpl{{name: "go"}} }
