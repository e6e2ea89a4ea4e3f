//go:build linux && amd64 && !purego

package bf16gemm

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Linux's arch_prctl codes for extended state permissions
// (arch/x86/include/uapi/asm/prctl.h) and the tile data component.
const (
	archGetXCompPerm  = 0x1022
	archReqXCompPerm  = 0x1023
	xfeatureXTileData = 18
)

// amxPermission asks Linux for the tile data state for this process (the
// first use of a tile instruction without it kills the thread with
// SIGILL) and checks that it was granted.
func amxPermission() error {
	if _, _, e := unix.Syscall(unix.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0); e != 0 {
		return fmt.Errorf("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): %w", e)
	}
	var perm uint64
	if _, _, e := unix.Syscall(unix.SYS_ARCH_PRCTL, archGetXCompPerm, uintptr(unsafe.Pointer(&perm)), 0); e != 0 {
		return fmt.Errorf("arch_prctl(ARCH_GET_XCOMP_PERM): %w", e)
	}
	if perm&(1<<xfeatureXTileData) == 0 {
		return fmt.Errorf("arch_prctl granted %#x, without the tile data (bit %d)", perm, xfeatureXTileData)
	}
	return nil
}
