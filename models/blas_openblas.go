//go:build openblas && cgo

package models

import "gptlab/internal/sgemm/openblas"

func init() { blasImpls["openblas"] = openblas.Use }
