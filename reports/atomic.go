package reports

import (
	"io"

	"gptlab/internal/atomicfile"
)

// WriteFileAtomic writes what src produces to path through a temporary file
// in the same directory, synced and then renamed over path, so a reader (or
// an interrupted run) never sees half a file. An error names path, never
// the temporary file. It is atomicfile.Write, kept here for the commands
// that write reports and plans.
func WriteFileAtomic(path string, src io.WriterTo) error {
	return atomicfile.Write(path, src)
}

// WriterFunc adapts a function to io.WriterTo (atomicfile.WriterFunc).
type WriterFunc = atomicfile.WriterFunc
