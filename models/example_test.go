package models

import (
	"fmt"
	"os"
	"path/filepath"
)

func ExampleWriteSafetensors() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "batch.safetensors")
	err := WriteSafetensors(path, map[string]Tensor{
		"idx":  IntTensor("I64", []int{1, 3}, []int64{5, 6, 7}),
		"loss": F32Tensor([]int{1}, []float32{4.17}),
	}, map[string]string{"n_layer": "2"})
	if err != nil {
		panic(err)
	}
	ts, meta, err := ReadSafetensors(path)
	fmt.Println(err, ts["idx"].DType, ts["idx"].Shape, ts["idx"].Ints, ts["loss"].F32, meta["n_layer"])
	// Output: <nil> I64 [1 3] [5 6 7] [4.17] 2
}

func ExampleDropoutMask() {
	a := make([]float32, 8)
	DropoutMask(a, 0.5, 1, 7, 0, SiteAttn)
	b := make([]float32, 8)
	DropoutMask(b, 0.5, 1, 7, 0, SiteAttn) // the same counters: the same mask, no stored state
	fmt.Println(a)
	fmt.Println(maxAbsDiff(a, b) == 0)
	// Output:
	// [0 0 0 0 0 2 2 0]
	// true
}
