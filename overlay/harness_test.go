package overlay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ftlaunch/ftlaunch/overlay"
)

// tree is a test topology: parent[i] < i for every node but the root 0.
type tree struct {
	parent  []int
	members [][]int // member ids hosted by each node
}

// karyTree builds a k-ary tree of n nodes in breadth-first order.
func karyTree(n, k int) []int {
	p := make([]int, n)
	p[0] = overlay.NoParent
	for i := 1; i < n; i++ {
		p[i] = (i - 1) / k
	}
	return p
}

// randomTree builds a random recursive tree: each node's parent is a
// uniformly chosen earlier node.
func randomTree(n int, rng *rand.Rand) []int {
	p := make([]int, n)
	p[0] = overlay.NoParent
	for i := 1; i < n; i++ {
		p[i] = rng.IntN(i)
	}
	return p
}

// blockMembers gives node i a random number of members in [0, max],
// numbered consecutively in node order; the root hosts none when
// rootEmpty.
func blockMembers(n, max int, rootEmpty bool, rng *rand.Rand) [][]int {
	ms := make([][]int, n)
	next := 0
	for i := range n {
		c := rng.IntN(max + 1)
		if i == 0 && rootEmpty {
			c = 0
		}
		for range c {
			ms[i] = append(ms[i], next)
			next++
		}
	}
	return ms
}

// scatteredMembers spreads total member ids, with gaps (ids are multiples
// of 3 plus a random offset), over random nodes.
func scatteredMembers(n, total int, rng *rand.Rand) [][]int {
	ms := make([][]int, n)
	for j := range total {
		id := 3*j + rng.IntN(3)
		node := rng.IntN(n)
		ms[node] = append(ms[node], id)
	}
	return ms
}

// topologies computes every node's Topology.
func (tr tree) topologies() []overlay.Topology {
	n := len(tr.parent)
	sub := make([]int, n)
	for i := range n {
		sub[i] = len(tr.members[i])
	}
	for i := n - 1; i > 0; i-- {
		sub[tr.parent[i]] += sub[i]
	}
	ts := make([]overlay.Topology, n)
	for i := range n {
		ts[i].Parent = tr.parent[i]
		ts[i].Members = tr.members[i]
	}
	for i := 1; i < n; i++ {
		p := tr.parent[i]
		ts[p].Children = append(ts[p].Children, overlay.Child{ID: i, Members: sub[i]})
	}
	return ts
}

func (tr tree) allMembers() []int {
	var all []int
	for _, m := range tr.members {
		all = append(all, m...)
	}
	slices.Sort(all)
	return all
}

// collector records every result, keyed by collective and member.
type collector struct {
	mu      sync.Mutex
	results map[overlay.CollID]map[int]overlay.Result
	twice   int // results delivered twice to one member
	changed chan struct{}
}

func newCollector() *collector {
	return &collector{results: make(map[overlay.CollID]map[int]overlay.Result), changed: make(chan struct{})}
}

func (c *collector) add(r overlay.Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.results[r.ID]
	if m == nil {
		m = make(map[int]overlay.Result)
		c.results[r.ID] = m
	}
	if _, ok := m[r.Member]; ok {
		c.twice++
	}
	m[r.Member] = r
	close(c.changed)
	c.changed = make(chan struct{})
}

// wait waits until collective id has want results or ctx ends.
func (c *collector) wait(ctx context.Context, id overlay.CollID, want int) (map[int]overlay.Result, error) {
	for {
		c.mu.Lock()
		got := len(c.results[id])
		ch := c.changed
		if got >= want {
			out := maps(c.results[id])
			c.mu.Unlock()
			return out, nil
		}
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("collective %v: %d of %d results: %w", id, got, want, ctx.Err())
		}
	}
}

func (c *collector) snapshot(id overlay.CollID) map[int]overlay.Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps(c.results[id])
}

func (c *collector) count(id overlay.CollID) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results[id])
}

func (c *collector) duplicates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.twice
}

func maps(m map[int]overlay.Result) map[int]overlay.Result {
	out := make(map[int]overlay.Result, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cluster runs one engine per node of a tree over a MemNetwork.
type cluster struct {
	tr     tree
	net    *overlay.MemNetwork
	eps    []*overlay.MemEndpoint
	engs   []*overlay.Engine
	res    *collector
	cancel context.CancelFunc
	wg     sync.WaitGroup
	owner  []int // node of each member
	total  int
}

// msgLog records every message the engines send.
type msgLog struct {
	mu   sync.Mutex
	msgs []sentMsg
}

type sentMsg struct {
	from, to int
	data     []byte
}

func (l *msgLog) all() []sentMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs)
}

// tap is a Transport that records what it sends in a msgLog.
type tap struct {
	overlay.Transport
	id  int
	log *msgLog
}

func (t *tap) Send(to int, msg []byte) error {
	t.log.mu.Lock()
	t.log.msgs = append(t.log.msgs, sentMsg{from: t.id, to: to, data: slices.Clone(msg)})
	t.log.mu.Unlock()
	return t.Transport.Send(to, msg)
}

// startCluster starts the engines; the engines stop and the network closes
// when the test ends. With a non-nil log every sent message is recorded.
func startCluster(t testing.TB, tr tree, mc overlay.MemConfig, log *msgLog) *cluster {
	t.Helper()
	c := &cluster{res: newCollector()}
	return c.start(t, tr, mc, log, c.res.add)
}

// start starts the engines of c, which deliver their results to onResult.
func (c *cluster) start(t testing.TB, tr tree, mc overlay.MemConfig, log *msgLog, onResult func(overlay.Result)) *cluster {
	t.Helper()
	c.tr, c.net = tr, overlay.NewMemNetwork(mc)
	ts := tr.topologies()
	maxID := 0
	for _, ms := range tr.members {
		for _, m := range ms {
			maxID = max(maxID, m)
			c.total++
		}
	}
	c.owner = make([]int, maxID+1)
	for i, ms := range tr.members {
		for _, m := range ms {
			c.owner[m] = i
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for i := range tr.parent {
		ep, err := c.net.Endpoint(i)
		if err != nil {
			t.Fatal(err)
		}
		var tp overlay.Transport = ep
		if log != nil {
			tp = &tap{Transport: ep, id: i, log: log}
		}
		e, err := overlay.NewEngine(overlay.Config{ID: i, Topology: ts[i], Transport: tp, OnResult: onResult})
		if err != nil {
			t.Fatal(err)
		}
		c.eps = append(c.eps, ep)
		c.engs = append(c.engs, e)
		c.wg.Go(func() { _ = e.Run(ctx) })
	}
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) stop() {
	c.cancel()
	c.wg.Wait()
	c.net.Close()
}

// contribute makes every member (but those skipped) contribute value(m).
func (c *cluster) contribute(t testing.TB, id overlay.CollID, op overlay.Op, value func(m int) []byte, skip map[int]bool) {
	t.Helper()
	for i, ms := range c.tr.members {
		for _, m := range ms {
			if skip[m] {
				continue
			}
			var v []byte
			if value != nil {
				v = value(m)
			}
			if err := c.engs[i].Contribute(id, op, m, v); err != nil && !errors.Is(err, overlay.ErrFinished) {
				t.Fatalf("contribute member %d: %v", m, err)
			}
		}
	}
}

func (c *cluster) setEpoch(t testing.TB, e uint64) {
	t.Helper()
	for i, eng := range c.engs {
		if err := eng.SetEpoch(e); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

func (c *cluster) stats() overlay.Stats {
	var s overlay.Stats
	for _, e := range c.engs {
		x := e.Stats()
		s.MsgsSent += x.MsgsSent
		s.BytesSent += x.BytesSent
		s.MsgsRecv += x.MsgsRecv
		s.BytesRecv += x.BytesRecv
		s.Duplicates += x.Duplicates
		s.Stale += x.Stale
		s.Deferred += x.Deferred
		s.Rejected += x.Rejected
		s.SendErrors += x.SendErrors
	}
	return s
}

// memberValue returns the value of each member for a collective; values
// are computed once and cached, so that checking a thousand nodes' results
// stays cheap.
func memberValue(tag string) func(m int) []byte {
	var mu sync.Mutex
	cache := make(map[int][]byte)
	return func(m int) []byte {
		mu.Lock()
		defer mu.Unlock()
		v, ok := cache[m]
		if !ok {
			v = fmt.Appendf(nil, "%s-%d", tag, m)
			cache[m] = v
		}
		return v
	}
}
