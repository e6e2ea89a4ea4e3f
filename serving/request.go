package serving

import (
	"errors"
	"fmt"
)

// Request is one client request as a workload or a trace gives it.
type Request struct {
	ID      int     // index in the workload; also seeds its synthetic tokens
	Arrival float64 // seconds since the start of the run
	Prompt  int     // prompt tokens
	// Output is the request's max_tokens: it ends after this many output
	// tokens, or earlier when the driver reports a stop (EOS).
	Output int
	// Cancel is the time (seconds) the client cancels; a time not later
	// than Arrival (the zero value included) means never.
	Cancel float64
	// Group names a shared prefix (0: none): the first PrefixLen prompt
	// tokens of every request of a group are the same tokens.
	Group     int
	PrefixLen int
	// Tokens are the prompt's tokens when known (a real engine); nil means
	// synthetic tokens derived from ID and Group.
	Tokens []int32
}

// Cancels reports whether the client cancels the request.
func (r *Request) Cancels() bool { return r.Cancel > r.Arrival }

// Validate reports a request the server cannot take as given.
func (r *Request) Validate() error {
	switch {
	case r.Prompt < 1:
		return fmt.Errorf("request %d: prompt of %d tokens, want at least 1", r.ID, r.Prompt)
	case r.Output < 1:
		return fmt.Errorf("request %d: output of %d tokens, want at least 1", r.ID, r.Output)
	case r.PrefixLen < 0 || r.PrefixLen > r.Prompt:
		return fmt.Errorf("request %d: shared prefix of %d tokens in a prompt of %d", r.ID, r.PrefixLen, r.Prompt)
	case r.Group <= 0 && r.PrefixLen != 0:
		return fmt.Errorf("request %d: a shared prefix of %d tokens needs a group above 0", r.ID, r.PrefixLen)
	case r.Tokens != nil && len(r.Tokens) != r.Prompt:
		return fmt.Errorf("request %d: %d prompt tokens given for a prompt of %d", r.ID, len(r.Tokens), r.Prompt)
	}
	return nil
}

// State is where a sequence is in the server.
type State uint8

// The states of a sequence. Finished, Cancelled and Rejected are final.
const (
	Waiting   State = iota // queued: no blocks (new, or preempted by recompute)
	Running                // admitted: holds device blocks
	Swapped                // preempted by swap-out: its own blocks are in the host budget
	Finished               // produced its last token
	Cancelled              // the client cancelled it
	Rejected               // can never fit the server's budgets
)

var stateNames = [...]string{"waiting", "running", "swapped", "finished", "cancelled", "rejected"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// Ended reports whether the state is final.
func (s State) Ended() bool { return s >= Finished }

// ErrTooLarge marks a request that can never fit the server's block or
// token budget; Add rejects it.
var ErrTooLarge = errors.New("request can never fit the budget")

// Seq is a request's state inside the server: its block table, how much of
// it has KV, what it has produced. The scheduler and block manager change
// it; a driver reads it.
type Seq struct {
	Req   *Request
	State State
	// Table maps the sequence's logical blocks to physical blocks: logical
	// block j holds the KV of tokens [j*size, (j+1)*size).
	Table []BlockID
	// Computed counts the leading tokens whose KV is in Table's blocks.
	Computed int
	// Generated counts the output tokens sampled so far.
	Generated int
	// Out holds the sampled tokens when the request carries its prompt
	// tokens (Req.Tokens); synthetic requests derive them instead.
	Out         []int32
	Preemptions int

	admitted  int64 // admission counter at the last admission (larger: more recent)
	scheduled int64 // iteration the sequence was last scheduled in
	inFlight  bool  // in the batch between Schedule and Complete
	highWater int   // most tokens ever computed: the rest of a recompute is new work
	slot      int32 // the simulator's index of the request
	rec       seqRecord
}

// NewSeq makes the server-side state of a request.
func NewSeq(r *Request) *Seq { return &Seq{Req: r, scheduled: -1} }

// Len is the number of tokens the sequence knows: prompt plus sampled.
func (s *Seq) Len() int { return s.Req.Prompt + s.Generated }

// Pending is the number of known tokens without KV: what must be processed
// before the next token can be sampled.
func (s *Seq) Pending() int { return s.Len() - s.Computed }

// MaxKV is the most tokens of KV the sequence can ever hold.
func (s *Seq) MaxKV() int { return s.Req.Prompt + s.Req.Output - 1 }

// Token returns the sequence's token at position i (prompt, then output).
func (s *Seq) Token(i int) int32 {
	r := s.Req
	switch {
	case i < r.Prompt && r.Tokens != nil:
		return r.Tokens[i]
	case i < r.PrefixLen:
		return synthToken(groupKey(r.Group), i)
	case i < r.Prompt || r.Tokens == nil:
		return synthToken(requestKey(r.ID), i)
	}
	return s.Out[i-r.Prompt]
}

// NextSynthetic is the synthetic token a simulated request samples next.
func (s *Seq) NextSynthetic() int32 { return synthToken(requestKey(s.Req.ID), s.Len()) }

func groupKey(g int) uint64    { return uint64(g)<<1 | 1 }
func requestKey(id int) uint64 { return uint64(id) << 1 }

// synthToken is a 31-bit token derived from a key and a position.
func synthToken(key uint64, pos int) int32 {
	return int32(mix64(key*0x9e3779b97f4a7c15+uint64(pos)) >> 33)
}

// mix64 is splitmix64's finaliser: a bijection on 64 bits that spreads
// every input bit over the output.
func mix64(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	return z ^ z>>31
}
