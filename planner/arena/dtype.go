package arena

import (
	"fmt"
	"unsafe"

	"gorgonia.org/tensor"
)

// Dtype is the element type of a value the arena holds. The 16-bit
// floating formats are stored as their raw bits (Buf.U16); which format a
// 16-bit value is comes from the op that writes it (Typer), since gorgonia
// knows only uint16.
type Dtype uint8

// The element types. Their sizes are what the planner plans.
const (
	F64   Dtype = iota + 1 // float64
	F32                    // float32
	BF16                   // bfloat16, as uint16 bits
	FP16                   // IEEE binary16, as uint16 bits
	Int8                   // int8 (a quantized operand)
	Int32                  // int32
	Int                    // Go int (token ids, gorgonia's index type)
)

var dtypeNames = [...]string{F64: "f64", F32: "f32", BF16: "bf16", FP16: "fp16", Int8: "int8", Int32: "int32", Int: "int"}

// String names the type as reports print it.
func (d Dtype) String() string {
	if int(d) < len(dtypeNames) && dtypeNames[d] != "" {
		return dtypeNames[d]
	}
	return fmt.Sprintf("Dtype(%d)", int(d))
}

// Size is the bytes of one element.
func (d Dtype) Size() int64 {
	switch d {
	case F64:
		return 8
	case F32, Int32:
		return 4
	case BF16, FP16:
		return 2
	case Int8:
		return 1
	case Int:
		return int64(unsafe.Sizeof(int(0)))
	}
	return 0
}

// Tensor is the gorgonia dtype values of d are stored as.
func (d Dtype) Tensor() tensor.Dtype {
	switch d {
	case F64:
		return tensor.Float64
	case F32:
		return tensor.Float32
	case BF16, FP16:
		return tensor.Uint16
	case Int8:
		return tensor.Int8
	case Int32:
		return tensor.Int32
	case Int:
		return tensor.Int
	}
	return tensor.Dtype{}
}

// Typer is implemented by ops whose output's element type is not the
// gorgonia dtype alone: a cast to bf16 or fp16 (both stored as uint16).
type Typer interface {
	OutDtype() Dtype
}

// dtypeOf is the element type of a gorgonia dtype, or false for one the
// arena cannot hold (uint16 without a Typer saying which format it is).
func dtypeOf(t tensor.Dtype) (Dtype, bool) {
	switch t {
	case tensor.Float64:
		return F64, true
	case tensor.Float32:
		return F32, true
	case tensor.Int8:
		return Int8, true
	case tensor.Int32:
		return Int32, true
	case tensor.Int:
		return Int, true
	}
	return 0, false
}

// Buf is fixed storage an op reads or writes: its element type, the shape
// it has at that op, and the data as the one slice of its type.
type Buf struct {
	Dtype Dtype
	Shape tensor.Shape
	F64   []float64
	F32   []float32
	U16   []uint16 // BF16 and FP16 bits
	I8    []int8
	I32   []int32
	Int   []int
}

// Len is the number of elements the storage holds.
func (b Buf) Len() int {
	switch b.Dtype {
	case F64:
		return len(b.F64)
	case F32:
		return len(b.F32)
	case BF16, FP16:
		return len(b.U16)
	case Int8:
		return len(b.I8)
	case Int32:
		return len(b.I32)
	case Int:
		return len(b.Int)
	}
	return 0
}

// Is reports whether b is storage of type d holding exactly its shape.
func (b Buf) Is(d Dtype) bool {
	return b.Dtype == d && b.Shape != nil && b.Len() == b.Shape.TotalSize()
}

// Bytes is the storage as bytes (for fingerprints and byte patterns).
func (b Buf) Bytes() []byte {
	var p unsafe.Pointer
	switch b.Dtype {
	case F64:
		p = unsafe.Pointer(unsafe.SliceData(b.F64))
	case F32:
		p = unsafe.Pointer(unsafe.SliceData(b.F32))
	case BF16, FP16:
		p = unsafe.Pointer(unsafe.SliceData(b.U16))
	case Int8:
		p = unsafe.Pointer(unsafe.SliceData(b.I8))
	case Int32:
		p = unsafe.Pointer(unsafe.SliceData(b.I32))
	case Int:
		p = unsafe.Pointer(unsafe.SliceData(b.Int))
	}
	if p == nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), int64(b.Len())*b.Dtype.Size())
}

// bufAt is storage of type d and shape s at base (n elements).
func bufAt(d Dtype, s tensor.Shape, base unsafe.Pointer) Buf {
	n := s.TotalSize()
	b := Buf{Dtype: d, Shape: s}
	switch d {
	case F64:
		b.F64 = unsafe.Slice((*float64)(base), n)
	case F32:
		b.F32 = unsafe.Slice((*float32)(base), n)
	case BF16, FP16:
		b.U16 = unsafe.Slice((*uint16)(base), n)
	case Int8:
		b.I8 = unsafe.Slice((*int8)(base), n)
	case Int32:
		b.I32 = unsafe.Slice((*int32)(base), n)
	case Int:
		b.Int = unsafe.Slice((*int)(base), n)
	}
	return b
}

// data is the slice of b's type, as tensor.WithBacking takes it.
func (b Buf) data() any {
	switch b.Dtype {
	case F64:
		return b.F64
	case F32:
		return b.F32
	case BF16, FP16:
		return b.U16
	case Int8:
		return b.I8
	case Int32:
		return b.I32
	case Int:
		return b.Int
	}
	return nil
}

// Dense is a tensor over b's storage (no copy).
func (b Buf) Dense() *tensor.Dense {
	return tensor.New(tensor.WithShape(b.Shape.Clone()...), tensor.WithBacking(b.data()))
}

// BufOf is the storage of a dense tensor value, typed as d when d is 16-bit
// (uint16 data says nothing of its format) and from the data otherwise.
// False for a value with no fixed storage (a gorgonia scalar).
func BufOf(v any, d Dtype) (Buf, bool) {
	x, ok := v.(*tensor.Dense)
	if !ok {
		return Buf{}, false
	}
	b := Buf{Shape: x.Shape()}
	switch s := x.Data().(type) {
	case []float64:
		b.Dtype, b.F64 = F64, s
	case []float32:
		b.Dtype, b.F32 = F32, s
	case []uint16:
		if d != BF16 && d != FP16 {
			return Buf{}, false
		}
		b.Dtype, b.U16 = d, s
	case []int8:
		b.Dtype, b.I8 = Int8, s
	case []int32:
		b.Dtype, b.I32 = Int32, s
	case []int:
		b.Dtype, b.Int = Int, s
	default:
		return Buf{}, false
	}
	return b, true
}
