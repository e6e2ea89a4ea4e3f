package x86enc

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/ir"
	"github.com/mmcloughlin/avo/operand"
)

// Emit adds the encoded instruction b to avo's current function as BYTE
// directives after a comment naming it, and tells avo's liveness analysis
// what it reads (in) and writes (out). The registers it uses must be
// physical: the bytes name them.
func Emit(comment string, b []byte, in, out []operand.Op) {
	build.Comment(comment)
	for j, x := range b {
		ins := &ir.Instruction{Opcode: "BYTE", Operands: []operand.Op{operand.U8(x)}}
		if j == 0 {
			ins.Inputs, ins.Outputs = in, out
		}
		build.Instruction(ins)
	}
}
