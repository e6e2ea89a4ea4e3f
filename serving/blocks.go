package serving

import (
	"errors"
	"fmt"
	"slices"
)

// This file is the paged KV cache's block manager (PagedAttention): a
// finite budget of fixed-size blocks, a block table per sequence, blocks
// allocated on demand as a sequence grows and released when it ends, with
// reference counts, and vLLM's automatic prefix caching: a full block is
// keyed by the hash of its tokens and of every token before it, so a new
// sequence whose prompt starts with the same tokens maps the same physical
// blocks instead of computing them again. A shared block is never written:
// the first write into a block another sequence also maps copies it first
// (copy on write at the first divergent token). The contiguous baseline,
// which reserves the maximum length for every request, is the same manager
// with one block of that length per request and no caching (Contiguous).

// BlockID names a physical block. Device blocks are [0, Device); host (swap)
// blocks are [Device, Device+Host).
type BlockID int32

// NoBlock is the absence of a block.
const NoBlock BlockID = -1

// Copy is a block copy the driver performs before the model runs: the KV of
// the first Tokens slots of Src goes into Dst.
type Copy struct {
	Src, Dst BlockID
	Tokens   int
}

// BlockConfig sizes a block manager.
type BlockConfig struct {
	Size    int  // tokens per block (vLLM's default is 16)
	Device  int  // blocks in the device budget
	Host    int  // blocks in the host budget swapped-out sequences use (0: no swap)
	Caching bool // automatic prefix caching
}

// ErrNoBlocks says the device budget cannot provide the blocks asked for;
// ErrNoHostBlocks says the same of the host budget.
var (
	ErrNoBlocks     = errors.New("out of device blocks")
	ErrNoHostBlocks = errors.New("out of host blocks")
)

// BlockStats counts the block manager's events over a run.
type BlockStats struct {
	LookupTokens  int64 // tokens of sequences looked up in the prefix cache at admission
	HitTokens     int64 // of those, tokens whose KV was found cached (full blocks and partial matches)
	PartialTokens int64 // hit tokens found in a block shared only up to a divergent token
	CopyOnWrite   int64 // blocks copied at the first divergent token
	Evictions     int64 // cached blocks dropped to make room
	Dedups        int64 // blocks that became full with content already cached, merged into it
	SwapOut       int64 // blocks copied device → host
	SwapIn        int64 // blocks copied host → device
}

type blockMeta struct {
	ref    int32 // block tables listing this block
	filled int32 // slots written
	hashed bool  // full, hash and parent valid
	cached bool  // in the prefix cache (implies hashed, device)
	hash   uint64
	parent uint64 // chain hash of the blocks before it
	// lru links the evictable blocks (cached, ref 0), least recent first;
	// sib links the cached blocks of one partial-match key.
	lruPrev, lruNext BlockID
	sibPrev, sibNext BlockID
}

// Blocks is the block manager. It is not safe for concurrent use: the
// scheduler that owns it is driven from one goroutine.
type Blocks struct {
	cfg      BlockConfig
	meta     []blockMeta
	tok      []int32 // (Device+Host)*Size: each block's tokens, the content its KV stands for
	free     []BlockID
	hostFree []BlockID
	lruHead  BlockID
	lruTail  BlockID
	// evictable counts cached blocks nobody maps; they still count as free.
	evictable int
	cache     map[uint64]BlockID // chain hash → cached block
	// partial heads the cached blocks keyed by (parent hash, first token):
	// the candidates for a match that diverges inside a block.
	partial    map[uint64]BlockID
	used       int // device blocks with ref > 0
	usedFilled int // slots written in them
	hostUsed   int
	scratch    []int32
	stats      BlockStats
	// the checker's scratch, kept between checks
	checkRefs   []int32
	checkLister []int
	checkSeen   []bool
}

// NewBlocks makes a block manager with every block free.
func NewBlocks(cfg BlockConfig) (*Blocks, error) {
	if cfg.Size < 1 || cfg.Device < 1 || cfg.Host < 0 {
		return nil, fmt.Errorf("blocks: size %d, device %d, host %d: want size and device at least 1, host at least 0", cfg.Size, cfg.Device, cfg.Host)
	}
	n := cfg.Device + cfg.Host
	if int64(n)*int64(cfg.Size) > 1<<31 {
		return nil, fmt.Errorf("blocks: %d blocks of %d tokens: more than 2^31 slots", n, cfg.Size)
	}
	m := &Blocks{
		cfg:     cfg,
		meta:    make([]blockMeta, n),
		tok:     make([]int32, n*cfg.Size),
		lruHead: NoBlock, lruTail: NoBlock,
		cache:   map[uint64]BlockID{},
		partial: map[uint64]BlockID{},
		scratch: make([]int32, cfg.Size),
	}
	for i := range m.meta {
		m.meta[i].lruPrev, m.meta[i].lruNext = NoBlock, NoBlock
		m.meta[i].sibPrev, m.meta[i].sibNext = NoBlock, NoBlock
	}
	// Free lists are stacks; fill them so block 0 is handed out first.
	for i := cfg.Device - 1; i >= 0; i-- {
		m.free = append(m.free, BlockID(i))
	}
	for i := n - 1; i >= cfg.Device; i-- {
		m.hostFree = append(m.hostFree, BlockID(i))
	}
	return m, nil
}

// Contiguous is the baseline that reserves maxLen tokens of KV for every
// request at admission, out of a budget of tokens: a block manager whose one
// block per request is maxLen long, without prefix caching.
func Contiguous(maxLen, budgetTokens, hostTokens int) (*Blocks, error) {
	if maxLen < 1 || budgetTokens < maxLen {
		return nil, fmt.Errorf("contiguous: budget of %d tokens holds no request of %d", budgetTokens, maxLen)
	}
	return NewBlocks(BlockConfig{Size: maxLen, Device: budgetTokens / maxLen, Host: hostTokens / maxLen})
}

// Config returns the manager's configuration.
func (m *Blocks) Config() BlockConfig { return m.cfg }

// Stats returns the counts so far.
func (m *Blocks) Stats() BlockStats { return m.stats }

// Available is the number of device blocks an allocation can take now:
// free ones and cached ones nobody maps (evicted on demand).
func (m *Blocks) Available() int { return len(m.free) + m.evictable }

// Used is the number of device blocks some sequence maps.
func (m *Blocks) Used() int { return m.used }

// UsedSlots is the number of token slots written in the used blocks.
func (m *Blocks) UsedSlots() int { return m.usedFilled }

// HostUsed is the number of host blocks holding swapped-out KV.
func (m *Blocks) HostUsed() int { return m.hostUsed }

// For returns the blocks n tokens occupy.
func (m *Blocks) For(n int) int { return (n + m.cfg.Size - 1) / m.cfg.Size }

func (m *Blocks) onHost(id BlockID) bool { return int(id) >= m.cfg.Device }

// take hands out a device block with one reference, evicting the least
// recently used cached block when none is free. Callers check Available.
func (m *Blocks) take() BlockID {
	var id BlockID
	if n := len(m.free); n > 0 {
		id = m.free[n-1]
		m.free = m.free[:n-1]
	} else {
		id = m.lruHead
		if id == NoBlock {
			panic("serving: block allocation past the budget")
		}
		m.lruRemove(id)
		m.uncache(id)
		m.stats.Evictions++
	}
	b := &m.meta[id]
	b.ref, b.filled, b.hashed = 1, 0, false
	m.used++
	return id
}

// pin adds a reference to a cached block found by a lookup.
func (m *Blocks) pin(id BlockID) {
	b := &m.meta[id]
	b.ref++
	if b.ref == 1 {
		m.lruRemove(id)
		m.used++
		m.usedFilled += int(b.filled)
	}
}

// release drops a reference. A device block nobody maps stays in the
// cache (evictable, most recently used) when cached, and is free otherwise.
func (m *Blocks) release(id BlockID) {
	b := &m.meta[id]
	if b.ref <= 0 {
		panic(fmt.Sprintf("serving: block %d released with %d references", id, b.ref))
	}
	b.ref--
	if b.ref > 0 {
		return
	}
	if m.onHost(id) {
		b.filled, b.hashed = 0, false
		m.hostUsed--
		m.hostFree = append(m.hostFree, id)
		return
	}
	m.used--
	m.usedFilled -= int(b.filled)
	if b.cached {
		m.lruPush(id)
		return
	}
	b.filled, b.hashed = 0, false
	m.free = append(m.free, id)
}

// Free releases every block of a sequence; its KV is gone (a cached block
// stays findable until evicted).
func (m *Blocks) Free(s *Seq) {
	for _, id := range s.Table {
		m.release(id)
	}
	s.Table = s.Table[:0]
	s.Computed = 0
}

// needsCopy reports whether the next write of s lands in a block another
// sequence also maps.
func (m *Blocks) needsCopy(s *Seq) bool {
	c := s.Computed
	if c%m.cfg.Size == 0 {
		return false
	}
	return m.meta[s.Table[c/m.cfg.Size]].ref > 1
}

// ReserveCost is the number of device blocks Reserve(s, n) takes.
func (m *Blocks) ReserveCost(s *Seq, n int) int {
	need := max(m.For(s.Computed+n)-len(s.Table), 0)
	if m.needsCopy(s) {
		need++
	}
	return need
}

// Reserve makes room for the KV of the next n tokens of s (positions
// [s.Computed, s.Computed+n)): the copy-on-write of a shared partial block
// (appended to cow for the driver) and new blocks on demand. It takes
// nothing when it cannot take everything (ErrNoBlocks).
func (m *Blocks) Reserve(s *Seq, n int, cow *[]Copy) error {
	if cost := m.ReserveCost(s, n); cost > m.Available() {
		return fmt.Errorf("%w: %d needed, %d available", ErrNoBlocks, cost, m.Available())
	}
	size := m.cfg.Size
	if k := s.Computed % size; k != 0 {
		j := s.Computed / size
		id := s.Table[j]
		b := &m.meta[id]
		switch {
		case b.ref > 1: // shared: copy the first k slots into a block of its own
			nid := m.take()
			copy(m.tok[int(nid)*size:int(nid)*size+k], m.tok[int(id)*size:])
			m.meta[nid].filled = int32(k)
			m.usedFilled += k
			m.release(id)
			s.Table[j] = nid
			*cow = append(*cow, Copy{Src: id, Dst: nid, Tokens: k})
			m.stats.CopyOnWrite++
		case b.hashed: // cached but mapped by s alone: leave the cache, write in place
			m.uncache(id)
			b.hashed = false
			m.usedFilled -= int(b.filled) - k
			b.filled = int32(k)
		}
	}
	for need := m.For(s.Computed + n); len(s.Table) < need; {
		s.Table = append(s.Table, m.take())
	}
	return nil
}

// Commit records that the KV of the next n tokens of s is written (after
// Reserve, once the model ran): the slots hold the tokens, and a block that
// became full enters the prefix cache, or merges into an identical cached
// block.
func (m *Blocks) Commit(s *Seq, n int) {
	size := m.cfg.Size
	for i, end := s.Computed, s.Computed+n; i < end; {
		j := i / size
		id := s.Table[j]
		b := &m.meta[id]
		k := i % size
		if b.ref != 1 || b.hashed || int(b.filled) != k {
			panic(fmt.Sprintf("serving: write of token %d into block %d (ref %d, filled %d, hashed %v)", i, id, b.ref, b.filled, b.hashed))
		}
		stop := min(end, (j+1)*size)
		base := int(id)*size - j*size
		for p := i; p < stop; p++ {
			m.tok[base+p] = s.Token(p)
		}
		b.filled += int32(stop - i)
		m.usedFilled += stop - i
		if int(b.filled) == size && m.cfg.Caching {
			m.seal(s, j)
		}
		i = stop
	}
	s.Computed += n
	s.highWater = max(s.highWater, s.Computed)
}

// seal hashes the full logical block j of s and caches it.
func (m *Blocks) seal(s *Seq, j int) {
	size := m.cfg.Size
	id := s.Table[j]
	parent := rootHash
	if j > 0 {
		parent = m.meta[s.Table[j-1]].hash
	}
	content := m.tok[int(id)*size : int(id)*size+size]
	h := chainHash(parent, content)
	b := &m.meta[id]
	b.hash, b.parent, b.hashed = h, parent, true
	if other, ok := m.cache[h]; ok {
		if m.meta[other].parent == parent && slices.Equal(m.tok[int(other)*size:int(other)*size+size], content) {
			m.pin(other)
			s.Table[j] = other
			b.hashed = false // never cached: release returns it to the free list
			m.release(id)
			m.stats.Dedups++
		}
		return // a hash collision keeps its block private
	}
	m.cache[h] = id
	b.cached = true
	m.sibInsert(id)
}

// Match is the cached prefix of a sequence found at admission.
type Match struct {
	Full       []BlockID // cached full blocks, in order
	Partial    BlockID   // a cached block the sequence shares up to a divergent token, or NoBlock
	PartialLen int       // tokens of Partial the sequence shares
	Tokens     int       // tokens covered: len(Full)*size + PartialLen
	// Cost is the number of blocks attaching the match takes out of
	// Available: matched blocks nobody else maps, and the partial block
	// (copied or written in place).
	Cost int
}

// maxPartialCandidates bounds the cached blocks compared for a partial
// match; a longer list is cut (the match found may then be shorter).
const maxPartialCandidates = 8

// Lookup finds the cached prefix of s, which holds no blocks, into mt.
// The last known token is never matched: its logits are needed to sample.
func (m *Blocks) Lookup(s *Seq, mt *Match) {
	mt.Full, mt.Partial, mt.PartialLen, mt.Tokens, mt.Cost = mt.Full[:0], NoBlock, 0, 0, 0
	if !m.cfg.Caching || len(s.Table) > 0 {
		return
	}
	size := m.cfg.Size
	limit := s.Len() - 1
	parent := rootHash
	for j := 0; j*size < limit; j++ {
		n := min(size, limit-j*size)
		buf := m.scratch[:n]
		for t := range buf {
			buf[t] = s.Token(j*size + t)
		}
		if n == size {
			h := chainHash(parent, buf)
			if id, ok := m.cache[h]; ok && m.meta[id].parent == parent && slices.Equal(m.tok[int(id)*size:int(id)*size+size], buf) {
				mt.Full = append(mt.Full, id)
				if m.meta[id].ref == 0 {
					mt.Cost++
				}
				parent = h
				continue
			}
		}
		// The sequence diverges inside block j: find the cached block
		// after the same prefix sharing the most leading tokens with it.
		c, ok := m.partial[partialKey(parent, buf[0])]
		if !ok {
			c = NoBlock
		}
		for tries := 0; c != NoBlock && tries < maxPartialCandidates; tries++ {
			if m.meta[c].parent == parent {
				k := commonPrefix(m.tok[int(c)*size:int(c)*size+size], buf)
				if k > mt.PartialLen && k < size {
					mt.Partial, mt.PartialLen = c, k
				}
			}
			c = m.meta[c].sibNext
		}
		break
	}
	mt.Tokens = len(mt.Full)*size + mt.PartialLen
	if mt.Partial != NoBlock {
		mt.Cost++ // copied when shared, taken out of the cache otherwise
	}
}

// AdmitCost is the number of device blocks attaching mt and then
// reserving the next n tokens takes.
func (m *Blocks) AdmitCost(mt *Match, n int) int {
	held := len(mt.Full)
	if mt.Partial != NoBlock {
		held++
	}
	return mt.Cost + max(m.For(mt.Tokens+n)-held, 0)
}

// Attach maps a match into the table of s (which holds no blocks): its KV
// counts as computed.
func (m *Blocks) Attach(s *Seq, mt *Match) {
	if len(s.Table) > 0 {
		panic("serving: attach to a sequence that holds blocks")
	}
	for _, id := range mt.Full {
		m.pin(id)
		s.Table = append(s.Table, id)
	}
	if mt.Partial != NoBlock {
		m.pin(mt.Partial)
		s.Table = append(s.Table, mt.Partial)
		m.stats.PartialTokens += int64(mt.PartialLen)
	}
	s.Computed = mt.Tokens
	if m.cfg.Caching {
		m.stats.LookupTokens += int64(s.Len())
		m.stats.HitTokens += int64(mt.Tokens)
	}
}

// SwapOut copies every block of s to the host budget (appending the
// copies to out) and releases the device blocks; a block s shared stays
// with its other owners, and s gets a private copy. It moves nothing when
// the host budget is short (ErrNoHostBlocks). A swapped-out sequence holds
// no device block, so it can always come back once the device drains.
func (m *Blocks) SwapOut(s *Seq, out *[]Copy) error {
	if need := len(s.Table); need > len(m.hostFree) {
		return fmt.Errorf("%w: %d needed, %d free", ErrNoHostBlocks, need, len(m.hostFree))
	}
	for j, id := range s.Table {
		h := m.hostFree[len(m.hostFree)-1]
		m.hostFree = m.hostFree[:len(m.hostFree)-1]
		m.hostUsed++
		m.moveContent(id, h)
		m.meta[h].ref = 1
		*out = append(*out, Copy{Src: id, Dst: h, Tokens: int(m.meta[id].filled)})
		m.release(id)
		s.Table[j] = h
		m.stats.SwapOut++
	}
	return nil
}

// SwapInCost is the number of device blocks SwapIn(s) takes.
func (m *Blocks) SwapInCost(s *Seq) int {
	n := 0
	for _, id := range s.Table {
		if m.onHost(id) {
			n++
		}
	}
	return n
}

// SwapIn brings the host blocks of s back to the device (appending the
// copies to in), or nothing when the device budget is short.
func (m *Blocks) SwapIn(s *Seq, in *[]Copy) error {
	if need := m.SwapInCost(s); need > m.Available() {
		return fmt.Errorf("%w: %d needed, %d available", ErrNoBlocks, need, m.Available())
	}
	for j, h := range s.Table {
		if !m.onHost(h) {
			continue
		}
		g := m.take()
		m.moveContent(h, g)
		m.usedFilled += int(m.meta[g].filled)
		*in = append(*in, Copy{Src: h, Dst: g, Tokens: int(m.meta[g].filled)})
		m.release(h)
		s.Table[j] = g
		m.stats.SwapIn++
	}
	return nil
}

// moveContent copies a block's tokens, fill and hash into another block.
func (m *Blocks) moveContent(src, dst BlockID) {
	size := m.cfg.Size
	copy(m.tok[int(dst)*size:int(dst)*size+size], m.tok[int(src)*size:int(src)*size+size])
	s, d := &m.meta[src], &m.meta[dst]
	d.filled, d.hashed, d.hash, d.parent = s.filled, s.hashed, s.hash, s.parent
}

// uncache takes a cached block out of the prefix cache.
func (m *Blocks) uncache(id BlockID) {
	b := &m.meta[id]
	if !b.cached {
		return
	}
	delete(m.cache, b.hash)
	m.sibRemove(id)
	b.cached = false
}

func (m *Blocks) lruPush(id BlockID) {
	b := &m.meta[id]
	b.lruPrev, b.lruNext = m.lruTail, NoBlock
	if m.lruTail != NoBlock {
		m.meta[m.lruTail].lruNext = id
	} else {
		m.lruHead = id
	}
	m.lruTail = id
	m.evictable++
}

func (m *Blocks) lruRemove(id BlockID) {
	b := &m.meta[id]
	if b.lruPrev != NoBlock {
		m.meta[b.lruPrev].lruNext = b.lruNext
	} else {
		m.lruHead = b.lruNext
	}
	if b.lruNext != NoBlock {
		m.meta[b.lruNext].lruPrev = b.lruPrev
	} else {
		m.lruTail = b.lruPrev
	}
	b.lruPrev, b.lruNext = NoBlock, NoBlock
	m.evictable--
}

func (m *Blocks) sibKey(id BlockID) uint64 {
	return partialKey(m.meta[id].parent, m.tok[int(id)*m.cfg.Size])
}

func (m *Blocks) sibInsert(id BlockID) {
	key := m.sibKey(id)
	b := &m.meta[id]
	b.sibPrev, b.sibNext = NoBlock, NoBlock
	if head, ok := m.partial[key]; ok {
		b.sibNext = head
		m.meta[head].sibPrev = id
	}
	m.partial[key] = id
}

func (m *Blocks) sibRemove(id BlockID) {
	b := &m.meta[id]
	if b.sibPrev != NoBlock {
		m.meta[b.sibPrev].sibNext = b.sibNext
	} else if b.sibNext != NoBlock {
		m.partial[m.sibKey(id)] = b.sibNext
	} else {
		delete(m.partial, m.sibKey(id))
	}
	if b.sibNext != NoBlock {
		m.meta[b.sibNext].sibPrev = b.sibPrev
	}
	b.sibPrev, b.sibNext = NoBlock, NoBlock
}

// rootHash is the chain hash before a sequence's first block.
const rootHash uint64 = 0x6a09e667f3bcc908

// chainHash keys a full block by its parent's hash and its own tokens, so
// equal hashes mean (up to collisions, which every use checks) equal
// prefixes.
func chainHash(parent uint64, toks []int32) uint64 {
	h := parent
	for _, t := range toks {
		h = (h ^ uint64(uint32(t))) * 0x100000001b3
		h ^= h >> 29
	}
	return mix64(h)
}

func partialKey(parent uint64, first int32) uint64 {
	return mix64(parent ^ uint64(uint32(first))*0x9e3779b97f4a7c15)
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
