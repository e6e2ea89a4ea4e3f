package parallel

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// frame lays out a whole frame: header, payload, trailer.
func frame(h header, payload []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(payload)+trailerLen)
	putHeader(b, h)
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, frameCRC(b, payload))
}

// receive checks a frame as a receiver does.
func receive(f []byte) (header, error) {
	h, err := parseHeader(f)
	if err != nil {
		return h, err
	}
	n := len(f) - framing
	return h, checkCRC(frameCRC(f, f[headerLen:headerLen+n]), f[headerLen+n:], n)
}

func TestFrameChecks(t *testing.T) {
	payload := []byte("a payload of some bytes")
	h := header{kind: uint8(AllReduce), length: uint32(len(payload)), seq: 7, coll: 3}
	if got, err := receive(frame(h, payload)); err != nil || got != h {
		t.Fatalf("receive(frame(%+v)) = %+v, %v", h, got, err)
	}
	for _, tc := range []struct {
		name string
		at   int // byte to damage
		want string
	}{
		{"payload bit", headerLen + 3, "checksum"},
		{"sequence", 8, "checksum"},
		{"trailer", headerLen + len(payload), "checksum"},
		{"magic", 0, "magic"},
		{"reserved", 3, "reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := frame(h, payload)
			f[tc.at] ^= 1
			if _, err := receive(f); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("damaged %s: %v, want ErrMalformed mentioning %q", tc.name, err, tc.want)
			}
		})
	}
	want := header{kind: uint8(AllReduce), length: 10, seq: 7, coll: 3}
	for _, tc := range []struct {
		h    header
		want string
	}{
		{header{kind: uint8(Broadcast), length: 10, seq: 7, coll: 3}, "kind broadcast, want all-reduce"},
		{header{kind: uint8(AllReduce), length: 10, seq: 7, coll: 4}, "collective #4, want #3"},
		{header{kind: uint8(AllReduce), length: 10, seq: 8, coll: 3}, "sequence 8, want 7"},
		{header{kind: uint8(AllReduce), length: 11, seq: 7, coll: 3}, "length 11 bytes, want 10"},
	} {
		if err := tc.h.expect(want); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("expect(%+v) = %v, want %q", tc.h, err, tc.want)
		}
	}
}

// FuzzParseHeader: any bytes decode or fail cleanly, and a decoded header
// re-encodes to the same fields.
func FuzzParseHeader(f *testing.F) {
	f.Add(frame(header{kind: 1, length: 4, seq: 2, coll: 3}, []byte{1, 2, 3, 4}))
	f.Add([]byte{})
	f.Add([]byte("gp\x00\x00xxxxxxxxxxxxxxxx"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := parseHeader(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("parseHeader error %v is not ErrMalformed", err)
			}
			return
		}
		var again [headerLen]byte
		putHeader(again[:], h)
		if h2, err := parseHeader(again[:]); err != nil || h2 != h {
			t.Fatalf("round trip of %+v gave %+v, %v", h, h2, err)
		}
	})
}

func TestParseEnv(t *testing.T) {
	base := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // error text, or "" for success
	}{
		{"torchrun", nil, ""},
		{"no rank", map[string]string{"RANK": ""}, "RANK is not set"},
		{"rank too big", map[string]string{"RANK": "2"}, "RANK=2: want less than WORLD_SIZE=2"},
		{"negative", map[string]string{"RANK": "-1"}, `RANK="-1"`},
		{"bad port", map[string]string{"MASTER_PORT": "http"}, `MASTER_PORT="http"`},
		{"no master", map[string]string{"MASTER_ADDR": ""}, "MASTER_ADDR and MASTER_PORT must be set"},
		{"deadline", map[string]string{"GPTLAB_DEADLINE": "3s"}, ""},
		{"bad deadline", map[string]string{"GPTLAB_DEADLINE": "soon"}, `GPTLAB_DEADLINE="soon"`},
		{"bad job", map[string]string{"GPTLAB_JOB": "../x"}, `GPTLAB_JOB="../x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseEnv(func(k string) string {
				if v, ok := tc.set[k]; ok {
					return v
				}
				return base[k]
			})
			if tc.want == "" {
				if err != nil || e.Rank != 1 || e.WorldSize != 2 || e.LocalRank != 1 || e.Master != "127.0.0.1:29500" {
					t.Fatalf("ParseEnv = %+v, %v", e, err)
				}
				if tc.set["GPTLAB_DEADLINE"] == "3s" && e.Deadline != 3*time.Second {
					t.Fatalf("deadline %v, want 3s", e.Deadline)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseEnv = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func FuzzParseEnv(f *testing.F) {
	f.Add("0", "1", "", "", "", "")
	f.Add("1", "2", "127.0.0.1", "29500", "10s", "ab-1")
	f.Add("x", "-3", "h", "99999", "-1s", "A")
	f.Fuzz(func(t *testing.T, rank, world, addr, port, deadline, job string) {
		vars := map[string]string{"RANK": rank, "WORLD_SIZE": world, "MASTER_ADDR": addr, "MASTER_PORT": port,
			"GPTLAB_DEADLINE": deadline, "GPTLAB_JOB": job}
		e, err := ParseEnv(func(k string) string { return vars[k] })
		if err == nil && (e.Rank < 0 || e.Rank >= e.WorldSize || e.Deadline < 0 || (e.WorldSize > 1 && e.Master == "")) {
			t.Fatalf("ParseEnv accepted an impossible job: %+v", e)
		}
	})
}
