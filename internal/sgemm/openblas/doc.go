// Package openblas is gonum's BLAS with Sgemm replaced by OpenBLAS's
// cblas_sgemm through cgo, for comparison with package sgemm. Its code
// builds only with the `openblas` build tag (and cgo, linking -lopenblas):
//
//	go test -tags openblas -bench Sgemm -cpu 1,2 ./internal/sgemm/
//
// Without the tag the package is empty, so the default build needs nothing
// but Go.
package openblas
