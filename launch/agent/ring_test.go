package agent

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// ringContrib is agent x's own part of ring seq: its ranks' values (rank r
// gives "r").
func ringContrib(seq uint64, x int, ranks ...int) *proto.Contrib {
	c := &proto.Contrib{Seq: seq, Op: rankproto.OpRing, Covers: []int{x}}
	for _, r := range ranks {
		c.Ranks = append(c.Ranks, r)
		c.Values = append(c.Values, []byte(fmt.Sprint(r)))
	}
	return c
}

// A ring goes up as a scan: the combined part covers the runs of its
// ranks and carries only their ends' values; under the root merge
// (FTLAUNCH_COLL_ROOT_MERGE) a part carries every value.
func TestCombinerRing(t *testing.T) {
	for _, full := range []bool{false, true} {
		cb := newCombiner()
		cb.full = full
		cb.add(-1, ringContrib(0, 1, 2, 3), 0)
		// Child 3 covers ranks 6..9 (agents 3 and 4), sending 6 and 9.
		child := &proto.Contrib{Seq: 0, Op: rankproto.OpRing, Covers: []int{3, 4}, Ranks: []int{6, 9}, Values: [][]byte{[]byte("6"), []byte("9")}, Spans: []proto.Span{{Lo: 6, Hi: 9}}}
		if full {
			child = ringContrib(0, 3, 6, 7, 8, 9)
		}
		cb.add(3, child, 0)
		cb.add(2, ringContrib(0, 2, 4, 5), 0)
		up := cb.ready(1, []int{2, 3}, true)
		if len(up) != 1 {
			t.Fatalf("full %v: %d contributions up", full, len(up))
		}
		c := up[0]
		want, spans := []int{2, 9}, []proto.Span{{Lo: 2, Hi: 9}}
		if full {
			want, spans = []int{2, 3, 4, 5, 6, 7, 8, 9}, nil
		}
		if !slices.Equal(c.Ranks, want) || !slices.Equal(c.Spans, spans) {
			t.Errorf("full %v: up ranks %v spans %v, want %v %v", full, c.Ranks, c.Spans, want, spans)
		}
		for i, r := range c.Ranks {
			if string(c.Values[i]) != fmt.Sprint(r) {
				t.Errorf("full %v: rank %d's value %q", full, r, c.Values[i])
			}
		}
	}
}

// ringSplit sends a child the values its runs' neighbours gave, and one
// the node has no parts from, or whose subtree changed, all it holds.
func TestRingSplit(t *testing.T) {
	const n = 12
	known := map[int][]byte{}
	for r := range n {
		known[r] = []byte{byte(r)}
	}
	spans := map[int][]proto.Span{5: {{Lo: 4, Hi: 5}}, 6: {{Lo: 6, Hi: 7}, {Lo: 10, Hi: 11}}, 7: {{Lo: 8, Hi: 9}}}
	parts := ringSplit(9, n, known, spans, map[int]bool{7: true}, []int{5, 6, 7, 8})
	for c, want := range map[int][]int{5: {3, 6}, 6: {0, 5, 8, 9}, 7: slices.Sorted(maps.Keys(known)), 8: slices.Sorted(maps.Keys(known))} {
		if got := parts[c]; got == nil || !slices.Equal(got.Ranks, want) || got.Size() != n {
			t.Errorf("child %d sent %+v, want ranks %v of %d", c, got, want, n)
		}
	}
}

// The scan over whole trees: every rank gets both neighbours' values, and
// no message carries more than two values per run of ranks it covers,
// whatever the job's size: on a breadth-first k-ary tree under block
// placement a subtree is one run per level, so a message carries O(depth)
// values (the root's children's, the most: 2 per level), not O(N).
func TestRingScanTree(t *testing.T) {
	for _, tc := range []struct {
		agents, ppn, k int
		cyclic         bool
		maxUp          int // the most values a message up may carry
	}{
		{agents: 16, ppn: 2, k: 2, maxUp: 8},
		{agents: 64, ppn: 2, k: 4, maxUp: 6},
		{agents: 128, ppn: 2, k: 4, maxUp: 8},
		{agents: 128, ppn: 8, k: 2, maxUp: 14},
		{agents: 7, ppn: 3, k: 1, maxUp: 2}, // a chain: every subtree is one run
		{agents: 8, ppn: 2, k: 2, cyclic: true, maxUp: 2 * 16},
	} {
		name := fmt.Sprintf("%d agents x %d, kary:%d, cyclic %v", tc.agents, tc.ppn, tc.k, tc.cyclic)
		n := tc.agents * tc.ppn
		ranksOf := make([][]int, tc.agents)
		for r := range n {
			x := r / tc.ppn
			if tc.cyclic {
				x = r % tc.agents
			}
			ranksOf[x] = append(ranksOf[x], r)
		}
		children := map[int][]int{} // by agent; -1: the root
		for x := range tc.agents {
			children[x/tc.k-1] = append(children[x/tc.k-1], x) // plan node x+1 (0: the root) has parent x/k, agent x/k-1
		}
		// Up, deepest first: agent x's index is above its children's.
		combs := make([]combiner, tc.agents)
		ups := map[int]*proto.Contrib{}
		for x := tc.agents - 1; x >= 0; x-- {
			combs[x] = newCombiner()
			combs[x].add(-1, ringContrib(0, x, ranksOf[x]...), 0)
			for _, c := range children[x] {
				combs[x].add(c, ups[c], 0)
			}
			out := combs[x].ready(x, children[x], true)
			if len(out) != 1 {
				t.Fatalf("%s: agent %d sent %d contributions", name, x, len(out))
			}
			ups[x] = out[0]
			if len(out[0].Ranks) > tc.maxUp || len(out[0].Ranks) > 2*len(out[0].Spans) {
				t.Errorf("%s: agent %d sent up %d values for %d run(s)", name, x, len(out[0].Ranks), len(out[0].Spans))
			}
		}
		// The root: what came up, and each child's part.
		rootComb := newCombiner()
		for _, c := range children[-1] {
			rootComb.add(c, ups[c], 0)
		}
		top := rootComb.open[0]
		down := map[int]*proto.CollResult{}
		maps.Copy(down, ringSplit(0, n, top.values, top.spans, nil, children[-1]))
		got := map[int][2]string{}
		for x := range tc.agents { // parents first
			res := down[x]
			if len(res.Ranks) > 2*len(ups[x].Spans) {
				t.Errorf("%s: agent %d was sent %d values for %d run(s)", name, x, len(res.Ranks), len(ups[x].Spans))
			}
			p := combs[x].open[0]
			known := res.ValueMap()
			for r, v := range p.values {
				known[r] = v
			}
			maps.Copy(down, ringSplit(0, n, known, p.spans, nil, children[x]))
			for _, r := range ranksOf[x] {
				nb := ringNeighbours(r, n)
				got[r] = [2]string{string(known[nb[0]]), string(known[nb[1]])}
			}
		}
		for r := range n {
			if want := [2]string{fmt.Sprint((r - 1 + n) % n), fmt.Sprint((r + 1) % n)}; got[r] != want {
				t.Errorf("%s: rank %d got neighbours %q, want %q", name, r, got[r], want)
			}
		}
	}
}

// frames records what an agent sends up.
type frames struct{ bytes.Buffer }

func (f *frames) Close() error { return nil }

func (f *frames) read(t *testing.T) []wire.Frame {
	t.Helper()
	var out []wire.Frame
	for f.Len() > 0 {
		fr, err := wire.ReadFrame(&f.Buffer, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fr)
	}
	return out
}

// An answer that lacks a value a rank needs (the tree changed while the
// ring was open, or it was sent again to a moved agent): the ranks whose
// neighbours are known get them, the others wait, across a recovery's
// Suspend, for the root's fill to the node's ask; the values the node
// held are kept for the root's recall.
func TestRingTakeAsksForWhatItLacks(t *testing.T) {
	const n, seq = 8, 5
	up := &frames{}
	rps := map[int]*rankProc{}
	a := &Agent{
		spec: &proto.NodeSpec{Size: n},
		up:   &uplink{l: proto.NewLink(up)},
		sup:  supervision{ranks: rps, order: []int{2, 3}},
		coll: collectives{firstColl: make(chan struct{}), colls: map[uint64]*localColl{}, sentUp: map[uint64][]byte{}, comb: newCombiner()},
	}
	for _, r := range []int{2, 3} {
		rps[r] = &rankProc{rank: r, replies: make(chan *proto.CollResult, 1)}
	}
	a.coll.colls[seq] = &localColl{op: rankproto.OpRing, values: map[int][]byte{2: []byte("2"), 3: []byte("3")}}
	a.coll.comb.add(-1, ringContrib(seq, 0, 2, 3), 0)
	// The answer carries rank 1's value, not rank 4's.
	a.ringDown(&proto.CollResult{Seq: seq, Op: rankproto.OpRing, N: n, Ranks: []int{1}, Values: [][]byte{[]byte("1")}})
	select {
	case res := <-rps[2].replies:
		if l, _ := res.Value(1); string(l) != "1" {
			t.Errorf("rank 2's left neighbour %q", l)
		}
	default:
		t.Fatal("rank 2 got no answer")
	}
	if len(rps[3].replies) != 0 {
		t.Fatal("rank 3 answered without its right neighbour")
	}
	fs := up.read(t)
	if len(fs) != 1 || fs[0].Type != proto.MRingAsk {
		t.Fatalf("sent up %v", fs)
	}
	ask, err := proto.DecodeRingAsk(fs[0].Payload)
	if err != nil || ask.Seq != seq || !slices.Equal(ask.Ranks, []int{4}) {
		t.Fatalf("ask %+v, %v", ask, err)
	}
	if got := a.ringAsks(); len(got) != 1 || !slices.Equal(got[0].Ranks, []int{4}) {
		t.Errorf("asks sent again on a resync: %+v", got)
	}
	// A recall of ranks 2 and 4: the node holds 2's (its rank) only.
	a.ringRecalled(proto.RingAsk{Seq: seq, Ranks: []int{2, 4}})
	fs = up.read(t)
	if len(fs) != 1 || fs[0].Type != proto.MRingValues {
		t.Fatalf("recall answered with %v", fs)
	}
	if res, err := proto.DecodeCollResult(fs[0].Payload); err != nil || !slices.Equal(res.Ranks, []int{2}) {
		t.Errorf("recall answered %+v, %v", res, err)
	}
	// The root's fill: rank 3 gets both its neighbours.
	a.ringTake(&proto.CollResult{Seq: seq, Op: rankproto.OpRing, N: n, Ranks: []int{4}, Values: [][]byte{[]byte("4")}})
	select {
	case res := <-rps[3].replies:
		l, _ := res.Value(2)
		r, _ := res.Value(4)
		if string(l) != "2" || string(r) != "4" {
			t.Errorf("rank 3's neighbours %q %q", l, r)
		}
	default:
		t.Fatal("rank 3 got no answer after the fill")
	}
	if len(a.coll.ringWait) != 0 || len(up.read(t)) != 0 {
		t.Errorf("still waiting: %v", a.coll.ringWait)
	}
	// The answer sent again (to a moved agent) is ignored.
	a.ringTake(&proto.CollResult{Seq: seq, Op: rankproto.OpRing, N: n})
	if len(rps[2].replies)+len(rps[3].replies) != 0 || len(up.read(t)) != 0 {
		t.Error("an answer taken twice")
	}
}
