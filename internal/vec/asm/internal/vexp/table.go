package vexp

import (
	"flag"
	"log"
	"math"
	"os"
	"regexp"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
)

// VecBytes is the size of one YMM vector in bytes.
const VecBytes = 32

// ConstTable lays out a generator's constants in one read-only symbol,
// each as a whole vector (8 copies), so that instructions take them as
// memory operands without a broadcast.
type ConstTable struct {
	bits  []uint32
	index map[string]int
	mem   Mem
}

// NewConstTable declares the symbol of a table.
func NewConstTable(symbol string) *ConstTable {
	return &ConstTable{index: map[string]int{}, mem: GLOBL(symbol, RODATA|NOPTR)}
}

// Add appends the constant name with the given bits.
func (c *ConstTable) Add(name string, bits uint32) {
	c.index[name] = len(c.bits)
	c.bits = append(c.bits, bits)
}

// AddFloat appends the float32 constant name.
func (c *ConstTable) AddFloat(name string, v float32) { c.Add(name, math.Float32bits(v)) }

// At addresses the vector of constant name; it is a Const.
func (c *ConstTable) At(name string) Mem {
	i, ok := c.index[name]
	if !ok {
		panic("no constant " + name)
	}
	return c.mem.Offset(i * VecBytes)
}

// Emit writes the DATA of the symbol.
func (c *ConstTable) Emit() {
	for i, b := range c.bits {
		for l := 0; l < 8; l++ {
			DATA(i*VecBytes+4*l, U32(b))
		}
	}
}

// CheckAVX2Registers fails if avo allocated a register that needs AVX-512
// (X16-X31, Y16-Y31, Z, K) in the file the -out flag names: its allocator
// knows 32 vector registers, and the kernels must run on AVX2 machines.
// Call it after Generate.
func CheckAVX2Registers() {
	out := flag.Lookup("out").Value.String()
	src, err := os.ReadFile(out)
	if err != nil {
		log.Fatal(err)
	}
	if m := avx512Register.Find(src); m != nil {
		log.Fatalf("%s uses %s, an AVX-512 register: lower the register pressure", out, m)
	}
}

// avx512Register matches the registers that only AVX-512 has.
var avx512Register = regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
