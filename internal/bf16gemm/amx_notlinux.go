//go:build !linux && amd64 && !purego

package bf16gemm

import "errors"

// amxPermission fails: only Linux's arch_prctl grants the tile state here.
func amxPermission() error {
	return errors.New("AMX tile state permission is requested only on Linux")
}
