package overlay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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

// maxSegments bounds the fenced segments a node keeps before it merges
// them into one.
const maxSegments = 8

// Put records a key/value pair at this node. Puts are buffered and travel
// with the next fence this node takes part in, aggregated with the other
// puts of the node; a later put of the same key at the same node replaces
// the earlier one. When two nodes put the same key before one fence, one
// value wins and every node sees the same one. value is copied. Put is safe
// for concurrent use.
func (e *Engine) Put(key string, value []byte) error {
	if len(key) == 0 || len(key) > MaxKeyLen {
		return fmt.Errorf("put: key of %d bytes (want 1..%d)", len(key), MaxKeyLen)
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("put %q: value of %d bytes exceeds %d", key, len(value), MaxValueLen)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
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

// addSegment adds the key/values of a completed fence to the store, merging
// the store into one segment when it holds too many.
func (e *Engine) addSegment(s kvSegment) {
	if len(s.offs) == 0 {
		return
	}
	e.store = append(e.store, s)
	if len(e.store) <= maxSegments {
		return
	}
	srcs := make([][]byte, 0, len(e.store))
	for i := len(e.store) - 1; i >= 0; i-- {
		srcs = append(srcs, e.store[i].body)
	}
	merged, err := indexKV(mergeKV(srcs))
	if err != nil {
		// The segments were validated; merging them cannot fail. Keep
		// them unmerged rather than lose data.
		return
	}
	e.store = []kvSegment{merged}
}

// A key/value body is a sequence of (key, value) pairs, each a
// length-prefixed byte string as wire.Encoder writes them, with strictly
// increasing keys.

// kvSegment is a validated body and the offset of each of its pairs.
type kvSegment struct {
	body []byte
	offs []uint32
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

func (s kvSegment) find(key string) ([]byte, bool) {
	i := sort.Search(len(s.offs), func(i int) bool {
		k, _ := s.at(i)
		return string(k) >= key
	})
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
// the earliest body wins.
func mergeKV(srcs [][]byte) []byte {
	type pair struct {
		k, v []byte
		src  int
	}
	var all []pair
	nonEmpty := 0
	var only []byte
	for si, b := range srcs {
		if len(b) == 0 {
			continue
		}
		nonEmpty++
		only = b
		for pos := 0; pos < len(b); {
			k, n, err := readLP(b[pos:])
			if err != nil {
				break
			}
			pos += n
			v, n, err := readLP(b[pos:])
			if err != nil {
				break
			}
			pos += n
			all = append(all, pair{k, v, si})
		}
	}
	if nonEmpty <= 1 {
		return only
	}
	slices.SortFunc(all, func(a, b pair) int {
		if c := bytes.Compare(a.k, b.k); c != 0 {
			return c
		}
		return cmpInt(a.src, b.src)
	})
	var enc wire.Encoder
	var last []byte
	for i, p := range all {
		if i > 0 && bytes.Equal(p.k, last) {
			continue
		}
		last = p.k
		enc.Bytes(p.k).Bytes(p.v)
	}
	return enc.Data()
}
