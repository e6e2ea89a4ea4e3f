//go:build openblas && cgo

package gptcheck

import "gptlab/internal/sgemm/openblas"

func init() {
	extraBLAS = append(extraBLAS, namedBLAS{"openblas", openblas.Implementation{}, openblas.SetThreads})
}
