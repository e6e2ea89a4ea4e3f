package crc32c_test

import (
	"fmt"
	"hash/crc32"

	"gptlab/internal/crc32c"
)

// A checksum may be continued piece by piece; it is hash/crc32's
// Castagnoli checksum, whichever kernel computes it.
func ExampleUpdate() {
	frame := make([]byte, 1<<20)
	for i := range frame {
		frame[i] = byte(i * 7)
	}
	sum := crc32c.Update(0, frame[:300000])
	sum = crc32c.Update(sum, frame[300000:])
	fmt.Println(sum == crc32.Checksum(frame, crc32.MakeTable(crc32.Castagnoli)))
	// Output: true
}
