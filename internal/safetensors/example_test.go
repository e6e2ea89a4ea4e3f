package safetensors

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
)

// A file holding three int64 token ids and one float32 loss.
//
// Why this output: Read gives back exactly what Write stored (the dtype,
// the shape and the values); %v prints a float32 with the fewest digits
// that read back to the same float32, so 4.17 prints as 4.17. The sizes
// follow from the format, not from the code: encoding/json writes map keys
// sorted, so the header is
//
//	{"__metadata__":{"n_layer":"2"},                                  32 bytes
//	"idx":{"dtype":"I64","shape":[1,3],"data_offsets":[0,24]},       58 bytes
//	"loss":{"dtype":"F32","shape":[1],"data_offsets":[24,28]}}        58 bytes
//
// 148 bytes, padded with spaces to the next multiple of 8, 152; the file is
// the 8-byte header length, the header, 3×8 bytes of idx and 4 of loss:
// 8 + 152 + 24 + 4 = 188 bytes.
func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "batch.safetensors")
	err := Write(path, map[string]Tensor{
		"idx":  Int("I64", []int{1, 3}, []int64{5, 6, 7}),
		"loss": F32([]int{1}, []float32{4.17}),
	}, map[string]string{"n_layer": "2"})
	if err != nil {
		panic(err)
	}
	ts, meta, err := Read(path)
	fmt.Println(err, ts["idx"].DType, ts["idx"].Shape, ts["idx"].Ints, ts["loss"].F32, meta["n_layer"])
	raw, _ := os.ReadFile(path)
	fmt.Println("header", binary.LittleEndian.Uint64(raw), "bytes, file", len(raw), "bytes")
	// Output:
	// <nil> I64 [1 3] [5 6 7] [4.17] 2
	// header 152 bytes, file 188 bytes
}
