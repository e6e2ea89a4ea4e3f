package parallel

import (
	"strconv"
	"sync/atomic"
)

// Kind is a collective.
type Kind uint8

// The collectives, in the order Stats lists them.
const (
	AllReduce Kind = iota
	ReduceScatter
	AllGather
	Broadcast
	Barrier
	numKinds
)

var kindNames = [...]string{"all-reduce", "reduce-scatter", "all-gather", "broadcast", "barrier"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return kindName(uint8(k))
}

// kindName names a frame's kind byte: a collective or a control message.
func kindName(k uint8) string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	if n, ok := controlNames[k]; ok {
		return n
	}
	return "kind " + strconv.Itoa(int(k))
}

// Counter is what one rank moved in one kind of collective.
type Counter struct {
	Calls int64
	// Sent and Received count payload bytes: the buffer data a rank sent
	// to or took from its neighbours.
	Sent, Received int64
	// WireSent and WireReceived add the framing (TCP frame headers, ring
	// slot headers): every byte the transport carried for the collective.
	WireSent, WireReceived int64
}

func (c Counter) sub(o Counter) Counter {
	return Counter{c.Calls - o.Calls, c.Sent - o.Sent, c.Received - o.Received, c.WireSent - o.WireSent, c.WireReceived - o.WireReceived}
}

// Stats are a rank's counters per collective, since Join.
type Stats [numKinds]Counter

// Of returns the counter of one collective.
func (s Stats) Of(k Kind) Counter { return s[k] }

// Total sums every collective.
func (s Stats) Total() Counter {
	var t Counter
	for _, c := range s {
		t.Calls += c.Calls
		t.Sent += c.Sent
		t.Received += c.Received
		t.WireSent += c.WireSent
		t.WireReceived += c.WireReceived
	}
	return t
}

// Sub returns s - o: what was moved between two snapshots.
func (s Stats) Sub(o Stats) Stats {
	var d Stats
	for k := range s {
		d[k] = s[k].sub(o[k])
	}
	return d
}

// counters are the live, atomically updated Stats of a communicator.
type counters [numKinds]struct {
	calls, sent, recv, wireSent, wireRecv atomic.Int64
}

func (c *counters) snapshot() Stats {
	var s Stats
	for k := range c {
		s[k] = Counter{c[k].calls.Load(), c[k].sent.Load(), c[k].recv.Load(), c[k].wireSent.Load(), c[k].wireRecv.Load()}
	}
	return s
}

func (c *counters) addSent(k Kind, payload, framing int) {
	c[k].sent.Add(int64(payload))
	c[k].wireSent.Add(int64(payload + framing))
}

func (c *counters) addRecv(k Kind, payload, framing int) {
	c[k].recv.Add(int64(payload))
	c[k].wireRecv.Add(int64(payload + framing))
}

// RingBytes is the ring model of what one rank sends (and receives) in
// an all-reduce of n bytes over p ranks: 2(p-1)/p·n.
func RingBytes(n int64, p int) float64 {
	return 2 * float64(p-1) / float64(p) * float64(n)
}
