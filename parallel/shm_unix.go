//go:build unix

package parallel

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// shmBuilt: the shared-memory transport is built here (shmSupported).
const shmBuilt = true

// shmDir is where the rings' files are made (shmDirIn of /dev/shm).
var shmDir = sync.OnceValue(func() string { return shmDirIn("/dev/shm") })

// shmDirIn is devShm where it is a directory (Linux: memory, never disk),
// else the temporary directory, os.TempDir (macOS: the per-user $TMPDIR;
// every rank of a job inherits the launcher's). The ring protocol and its
// checks are the same in either.
func shmDirIn(devShm string) string {
	if st, err := os.Stat(devShm); err == nil && st.IsDir() {
		return devShm
	}
	return os.TempDir()
}

// hostID names the host and its shared-memory directory: ranks with equal
// ids can share memory through files there.
func hostID() string {
	h, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	var st syscall.Stat_t
	syscall.Stat(shmDir(), &st)
	return fmt.Sprintf("%s/%s/%d:%d", h, strings.TrimSpace(string(boot)), st.Dev, st.Ino)
}

func ringSize() int { return shmRingHeader + shmSlots*(shmSlotHeader+shmSlotBytes) }

func mapRing(path string, create bool) (*ring, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := ringSize()
	if create {
		if err := f.Truncate(int64(size)); err != nil {
			os.Remove(path)
			return nil, err
		}
	} else if st, err := f.Stat(); err != nil || st.Size() != int64(size) {
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, st.Size(), size)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		if create {
			os.Remove(path)
		}
		return nil, fmt.Errorf("mmap %s: %w", path, err)
	}
	r := &ring{mem: mem, head: (*atomic.Uint64)(unsafe.Pointer(&mem[64])), tail: (*atomic.Uint64)(unsafe.Pointer(&mem[128]))}
	if create {
		r.path = path
		binary.LittleEndian.PutUint64(mem[0:], shmMagic)
		binary.LittleEndian.PutUint64(mem[8:], shmSlots)
		binary.LittleEndian.PutUint64(mem[16:], shmSlotBytes)
	} else if binary.LittleEndian.Uint64(mem[0:]) != shmMagic || binary.LittleEndian.Uint64(mem[8:]) != shmSlots ||
		binary.LittleEndian.Uint64(mem[16:]) != shmSlotBytes {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%s: not a ring of this version", path)
	}
	return r, nil
}

func (r *ring) unmap() {
	if r != nil && r.mem != nil {
		r.unlink()
		unix.Munmap(r.mem)
		r.mem = nil
	}
}
