package overlay

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sort"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Bounds of the bulletin board.
const (
	MaxKeyLen   = 1024
	MaxValueLen = 1 << 20
)

// Put records a key/value pair at this node. Puts are buffered and travel
// with the next fence this node takes part in, aggregated with the other
// puts of the node; a later put of the same key at the same node replaces
// the earlier one. When two nodes put the same key before one fence, one
// value wins and every node sees the same one. value is copied. A node
// whose subtree hosts no member takes part in no fence, so its puts are
// refused (ErrNoMembers). Put is safe for concurrent use.
func (e *Engine) Put(key string, value []byte) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("put: key of %d bytes (want 1..%d)", len(key), MaxKeyLen)
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("put %q: value of %d bytes exceeds %d", key, len(value), MaxValueLen)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.topo.subtree == 0 {
		// No fence ever passes through a subtree without members.
		return fmt.Errorf("put %q: node %d: %w", key, e.id, ErrNoMembers)
	}
	e.pending[key] = append([]byte{}, value...)
	return nil
}

// Get returns the value of key as of the last fence completed at this node;
// it never sends a message. A key that no fence carried returns an error
// wrapping ErrNotFound. The value is shared and must not be modified. Get
// is safe for concurrent use.
func (e *Engine) Get(key string) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.store) - 1; i >= 0; i-- {
		if v, ok := e.store[i].find(key); ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
}

// addSegment adds the key/values of a completed fence to the store. Like
// the levels of a log-structured merge tree, the newest segment is merged
// into the one before it while it holds at least half as many pairs, so a
// store of n pairs has O(log n) segments and each pair is merged O(log n)
// times.
func (e *Engine) addSegment(s kvSegment) {
	if len(s.offs) == 0 {
		return
	}
	s.hashIndex(e.seed)
	e.store = append(e.store, s)
	for n := len(e.store); n >= 2 && 2*len(e.store[n-1].offs) >= len(e.store[n-2].offs); n = len(e.store) {
		merged, err := indexKV(mergeKV([][]byte{e.store[n-1].body, e.store[n-2].body}))
		if err != nil {
			// Both were validated, so merging cannot fail; keep them
			// apart rather than lose data.
			return
		}
		merged.hashIndex(e.seed)
		e.store = append(e.store[:n-2], merged)
	}
}

// ResetKV forgets every fenced key/value pair and every buffered put, as a
// job restarted from scratch needs. Fences in flight still complete, with
// the puts they carried.
func (e *Engine) ResetKV() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.store = nil
	e.pending = make(map[string][]byte)
}

// A key/value body is a sequence of (key, value) pairs, each a
// length-prefixed byte string as wire.Encoder writes them, with strictly
// increasing keys.

// kvSegment is a validated body and the offset of each of its pairs.
type kvSegment struct {
	body  []byte
	offs  []uint32
	table []uint32 // 1 + index of a pair, by hash of its key; 0 is empty
	seed  maphash.Seed
}

var errKV = errors.New("malformed key/value list")

// indexKV validates body and indexes its pairs.
func indexKV(body []byte) (kvSegment, error) {
	if len(body) > math.MaxUint32 {
		return kvSegment{}, fmt.Errorf("%w: %d bytes", errKV, len(body))
	}
	s := kvSegment{body: body}
	var prev []byte
	for pos := 0; pos < len(body); {
		start := pos
		k, n, err := readLP(body[pos:])
		if err != nil {
			return kvSegment{}, err
		}
		pos += n
		_, n, err = readLP(body[pos:])
		if err != nil {
			return kvSegment{}, err
		}
		pos += n
		if len(k) == 0 || len(k) > MaxKeyLen || (len(s.offs) > 0 && bytes.Compare(k, prev) <= 0) {
			return kvSegment{}, fmt.Errorf("%w: empty, long or unordered key at %d", errKV, start)
		}
		prev = k
		s.offs = append(s.offs, uint32(start))
	}
	return s, nil
}

// readLP reads one length-prefixed byte string.
func readLP(b []byte) ([]byte, int, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, 0, fmt.Errorf("%w: truncated string", errKV)
	}
	return b[n : n+int(l) : n+int(l)], n + int(l), nil
}

// at returns pair i of an indexed segment.
func (s kvSegment) at(i int) (key, val []byte) {
	b := s.body[s.offs[i]:]
	key, n, _ := readLP(b)
	val, _, _ = readLP(b[n:])
	return key, val
}

// keyAt returns the key of pair i.
func (s kvSegment) keyAt(i int) []byte {
	k, _, _ := readLP(s.body[s.offs[i]:])
	return k
}

// hashIndex builds an open-addressing table over the keys of s, so that a
// get costs a hash and about one key comparison.
func (s *kvSegment) hashIndex(seed maphash.Seed) {
	size := 1
	for size < 2*len(s.offs) {
		size <<= 1
	}
	s.seed = seed
	s.table = make([]uint32, size)
	mask := uint64(size - 1)
	for i := range s.offs {
		h := maphash.Bytes(seed, s.keyAt(i)) & mask
		for s.table[h] != 0 {
			h = (h + 1) & mask
		}
		s.table[h] = uint32(i) + 1
	}
}

func (s kvSegment) find(key string) ([]byte, bool) {
	if s.table != nil {
		mask := uint64(len(s.table) - 1)
		for h := maphash.String(s.seed, key) & mask; s.table[h] != 0; h = (h + 1) & mask {
			if i := int(s.table[h] - 1); string(s.keyAt(i)) == key {
				_, v := s.at(i)
				return v, true
			}
		}
		return nil, false
	}
	i := sort.Search(len(s.offs), func(i int) bool { return string(s.keyAt(i)) >= key })
	if i == len(s.offs) {
		return nil, false
	}
	k, v := s.at(i)
	if string(k) != key {
		return nil, false
	}
	return v, true
}

// encodeKVMap encodes the pairs of m as a body.
func encodeKVMap(m map[string][]byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var enc wire.Encoder
	for _, k := range keys {
		enc.String(k).Bytes(m[k])
	}
	return enc.Data()
}

// mergeKV merges validated bodies into one; for a key present in several,
// the earliest body wins. Each body is sorted, so this is a k-way merge.
func mergeKV(srcs [][]byte) []byte {
	h := make(kvHeap, 0, len(srcs))
	total := 0
	var only []byte
	for si, b := range srcs {
		if len(b) == 0 {
			continue
		}
		total += len(b)
		only = b
		c := kvCursor{body: b, src: si}
		if c.next() {
			h = append(h, c)
		}
	}
	if len(h) <= 1 {
		return only
	}
	heap.Init(&h)
	out := make([]byte, 0, total)
	var last []byte
	for len(h) > 0 {
		c := &h[0]
		if last == nil || !bytes.Equal(c.k, last) {
			out = binary.AppendUvarint(out, uint64(len(c.k)))
			out = append(out, c.k...)
			out = binary.AppendUvarint(out, uint64(len(c.v)))
			out = append(out, c.v...)
			last = c.k
		}
		if c.next() {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return out
}

// kvCursor walks the pairs of a validated body.
type kvCursor struct {
	body []byte
	pos  int
	k, v []byte
	src  int
}

func (c *kvCursor) next() bool {
	if c.pos >= len(c.body) {
		return false
	}
	k, n, err := readLP(c.body[c.pos:])
	if err != nil {
		return false
	}
	v, m, err := readLP(c.body[c.pos+n:])
	if err != nil {
		return false
	}
	c.k, c.v, c.pos = k, v, c.pos+n+m
	return true
}

// kvHeap orders cursors by key, then by source.
type kvHeap []kvCursor

func (h kvHeap) Len() int { return len(h) }
func (h kvHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].k, h[j].k); c != 0 {
		return c < 0
	}
	return h[i].src < h[j].src
}
func (h kvHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *kvHeap) Push(x any)   { *h = append(*h, x.(kvCursor)) }
func (h *kvHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
