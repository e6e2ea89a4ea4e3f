package precision

// encKernel is a vector kernel narrowing float32 to a 16-bit format: it
// converts n values (n a multiple of group), saturating if sat.
type encKernel struct {
	name  string
	group int
	fn    func(dst *uint16, src *float32, n int, sat bool)
}

// decKernel is a vector kernel widening a 16-bit format to float32.
type decKernel struct {
	name  string
	group int
	fn    func(dst *float32, src *uint16, n int)
}

// absKernel returns the largest x[i]&0x7FFFFFFF of n values, multiplying
// them by inv in place when unscale is set (n a multiple of group).
type absKernel struct {
	name    string
	group   int
	maxAbs  func(x *float32, n int) uint32
	unscale func(x *float32, n int, inv float32) uint32
}

// kernelSet is one choice of kernel per operation; a zero kernel (nil fn)
// means the scalar code.
type kernelSet struct {
	encFP16, encBF16 encKernel
	decFP16, decBF16 decKernel
	abs              absKernel
}

// active is the set the package uses: the best of each list from
// archKernels. Tests swap it.
var active = bestKernels()

// bestKernels picks the first (best) kernel of each operation.
func bestKernels() kernelSet {
	var s kernelSet
	l := archKernels()
	if len(l.encFP16) > 0 {
		s.encFP16 = l.encFP16[0]
	}
	if len(l.encBF16) > 0 {
		s.encBF16 = l.encBF16[0]
	}
	if len(l.decFP16) > 0 {
		s.decFP16 = l.decFP16[0]
	}
	if len(l.decBF16) > 0 {
		s.decBF16 = l.decBF16[0]
	}
	if len(l.abs) > 0 {
		s.abs = l.abs[0]
	}
	return s
}

// kernelLists holds, per operation, the kernels this CPU runs, best first.
type kernelLists struct {
	encFP16, encBF16 []encKernel
	decFP16, decBF16 []decKernel
	abs              []absKernel
}

// Kernels names the kernels the slice conversions and the loss scaler's
// checks use on this machine, by operation ("go" for the scalar code).
func Kernels() map[string]string {
	name := func(n string) string {
		if n == "" {
			return "go"
		}
		return n
	}
	return map[string]string{
		"encode_fp16": name(active.encFP16.name), "decode_fp16": name(active.decFP16.name),
		"encode_bf16": name(active.encBF16.name), "decode_bf16": name(active.decBF16.name),
		"check": name(active.abs.name),
	}
}

// whole returns the leading count of n values a kernel of group g handles
// (0 without a kernel).
func whole(n, g int, have bool) int {
	if !have {
		return 0
	}
	return n - n%g
}

// encode converts src into dst with k over the whole groups and scalar
// over the rest.
func encode(k encKernel, dst []uint16, src []float32, sat bool, scalar func(float32) uint16) {
	n := whole(len(src), k.group, k.fn != nil)
	if n > 0 {
		k.fn(&dst[0], &src[0], n, sat)
	}
	for i := n; i < len(src); i++ {
		dst[i] = scalar(src[i])
	}
}

// decode widens src into dst with k over the whole groups and scalar over
// the rest.
func decode(k decKernel, dst []float32, src []uint16, scalar func(uint16) float32) {
	n := whole(len(src), k.group, k.fn != nil)
	if n > 0 {
		k.fn(&dst[0], &src[0], n)
	}
	for i := n; i < len(src); i++ {
		dst[i] = scalar(src[i])
	}
}
