package parallel

import (
	"encoding/binary"
	"fmt"

	"gptlab/internal/crc32c"
)

// A frame is one message on a TCP link: a 16-byte header, the payload,
// and a 4-byte trailer.
//
//	offset  size  field
//	0       2     magic 0x6770 ("gp")
//	2       1     kind: the collective (Kind) or a control message
//	3       1     zero
//	4       4     payload length in bytes
//	8       4     sequence: frames sent on this link before this one
//	12      4     collective id: collectives issued on the communicator
//	              before this one (0 for control messages)
//	16      n     payload
//	16+n    4     CRC-32C of the header and the payload
//
// All fields are little-endian. The checksum trails the payload so both
// sides can compute it piece by piece as the bytes go through the socket,
// while they are still in cache. The receiver knows which frame comes
// next (the ring schedule is the same on both sides), so every field is
// checked against what it expects, and a mismatch names the field.
const (
	headerLen  = 16
	trailerLen = 4
	framing    = headerLen + trailerLen // bytes a frame adds to its payload
	frameMagic = 0x6770
	// maxControlLen bounds a control message's payload.
	maxControlLen = 1 << 16
)

type header struct {
	kind   uint8
	length uint32
	seq    uint32
	coll   uint32
}

// putHeader writes h into b[:headerLen].
func putHeader(b []byte, h header) {
	binary.LittleEndian.PutUint16(b[0:], frameMagic)
	b[2] = h.kind
	b[3] = 0
	binary.LittleEndian.PutUint32(b[4:], h.length)
	binary.LittleEndian.PutUint32(b[8:], h.seq)
	binary.LittleEndian.PutUint32(b[12:], h.coll)
}

// crcUpdate extends a running frame checksum over more of its bytes
// (package crc32c: folded with VPCLMULQDQ where the CPU has it).
func crcUpdate(sum uint32, b []byte) uint32 { return crc32c.Update(sum, b) }

// frameCRC is the checksum of a whole frame.
func frameCRC(head, payload []byte) uint32 { return crcUpdate(crcUpdate(0, head[:headerLen]), payload) }

// parseHeader decodes a header and checks its magic and reserved byte.
func parseHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), headerLen)
	}
	if m := binary.LittleEndian.Uint16(b); m != frameMagic {
		return header{}, fmt.Errorf("%w: magic %#04x, want %#04x", ErrMalformed, m, frameMagic)
	}
	if b[3] != 0 {
		return header{}, fmt.Errorf("%w: reserved byte %#02x, want 0", ErrMalformed, b[3])
	}
	return header{
		kind:   b[2],
		length: binary.LittleEndian.Uint32(b[4:]),
		seq:    binary.LittleEndian.Uint32(b[8:]),
		coll:   binary.LittleEndian.Uint32(b[12:]),
	}, nil
}

// expect checks a received header against the one the schedule expects.
func (h header) expect(want header) error {
	switch {
	case h.kind != want.kind:
		return fmt.Errorf("%w: kind %s, want %s", ErrMalformed, kindName(h.kind), kindName(want.kind))
	case h.coll != want.coll:
		return fmt.Errorf("%w: collective #%d, want #%d", ErrMalformed, h.coll, want.coll)
	case h.seq != want.seq:
		return fmt.Errorf("%w: sequence %d, want %d", ErrMalformed, h.seq, want.seq)
	case h.length != want.length:
		return fmt.Errorf("%w: length %d bytes, want %d", ErrMalformed, h.length, want.length)
	}
	return nil
}

// checkCRC compares a received frame's checksum (sum, computed over what
// arrived) with its trailer.
func checkCRC(sum uint32, trailer []byte, n int) error {
	if want := binary.LittleEndian.Uint32(trailer); sum != want {
		return fmt.Errorf("%w: checksum %#08x, want %#08x (%d-byte payload)", ErrMalformed, sum, want, n)
	}
	return nil
}
