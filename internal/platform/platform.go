// Package platform holds what differs between the operating systems the
// labs run on and is asked about by more than one package, as variables:
// a test on one system sets one to take the path another system takes
// (the seam through which Linux tests exercise Windows's refusals).
package platform

import "runtime"

// SharedMemory says whether the shared-memory transport (parallel's shm)
// is offered. Windows has none: parallel.CheckTransport and Join refuse
// "shm" with parallel.ErrUnsupported (the commands exit 2, one line) and
// "auto" picks TCP. A test elsewhere sets it false to run that refusal.
var SharedMemory = runtime.GOOS != "windows"
