package parallel

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A frame is one message on a TCP link: a 20-byte header, then the payload.
//
//	offset  size  field
//	0       2     magic 0x6770 ("gp")
//	2       1     kind: the collective (Kind) or a control message
//	3       1     zero
//	4       4     payload length in bytes
//	8       4     sequence: frames sent on this link before this one
//	12      4     collective id: collectives issued on the communicator
//	              before this one (0 for control messages)
//	16      4     CRC-32C of bytes 0-15 and the payload
//
// All fields are little-endian. The receiver knows which frame comes
// next (the ring schedule is the same on both sides), so every field is
// checked against what it expects, and a mismatch names the field.
const (
	headerLen  = 20
	frameMagic = 0x6770
	// maxControlLen bounds a control message's payload.
	maxControlLen = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	kind   uint8
	length uint32
	seq    uint32
	coll   uint32
}

// putHeader writes h and the checksum of h and payload into b[:headerLen].
func putHeader(b []byte, h header, payload []byte) {
	binary.LittleEndian.PutUint16(b[0:], frameMagic)
	b[2] = h.kind
	b[3] = 0
	binary.LittleEndian.PutUint32(b[4:], h.length)
	binary.LittleEndian.PutUint32(b[8:], h.seq)
	binary.LittleEndian.PutUint32(b[12:], h.coll)
	binary.LittleEndian.PutUint32(b[16:], frameCRC(b[:16], payload))
}

func frameCRC(head, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, head), castagnoli, payload)
}

// parseHeader decodes a header and checks its magic and reserved byte; it
// returns the checksum the sender wrote, to be compared once the payload
// has arrived.
func parseHeader(b []byte) (header, uint32, error) {
	if len(b) < headerLen {
		return header{}, 0, fmt.Errorf("%w: header of %d bytes, want %d", ErrMalformed, len(b), headerLen)
	}
	if m := binary.LittleEndian.Uint16(b); m != frameMagic {
		return header{}, 0, fmt.Errorf("%w: magic %#04x, want %#04x", ErrMalformed, m, frameMagic)
	}
	if b[3] != 0 {
		return header{}, 0, fmt.Errorf("%w: reserved byte %#02x, want 0", ErrMalformed, b[3])
	}
	h := header{
		kind:   b[2],
		length: binary.LittleEndian.Uint32(b[4:]),
		seq:    binary.LittleEndian.Uint32(b[8:]),
		coll:   binary.LittleEndian.Uint32(b[12:]),
	}
	return h, binary.LittleEndian.Uint32(b[16:]), nil
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

// checkCRC compares the checksum of a received frame.
func checkCRC(head []byte, payload []byte, sent uint32) error {
	if got := frameCRC(head[:16], payload); got != sent {
		return fmt.Errorf("%w: checksum %#08x, want %#08x (%d-byte payload)", ErrMalformed, got, sent, len(payload))
	}
	return nil
}
