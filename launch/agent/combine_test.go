package agent

import (
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The combiner of agent 1, with children 2 and 3 (ranks 2r and 2r+1 on
// agent r), under the cases docs/collectives.md lists.
func TestCombiner(t *testing.T) {
	const self = 1
	ag := func(seq uint64, idx ...int) *proto.Contrib {
		c := &proto.Contrib{Seq: seq, Op: rankproto.OpAllgather, Covers: idx}
		for _, x := range idx {
			c.Ranks = append(c.Ranks, 2*x, 2*x+1)
			c.Values = append(c.Values, []byte{byte(2 * x)}, []byte{byte(2*x + 1)})
		}
		return c
	}
	type step struct {
		child  int // -1: the node's own ranks
		c      *proto.Contrib
		want   verdict
		epoch  uint64   // the node's collective epoch
		expect []int    // the children waited for (nil: 2 and 3)
		sent   [][]int  // the covers of the contributions that go up after it
		drop   []uint64 // abandon(epoch) before the step: the node took a Suspend
		waive  bool     // waive(wseq) before the step: the node's ranks all ended
		wseq   uint64
	}
	empty := func(seq uint64) *proto.Contrib { return &proto.Contrib{Seq: seq} }
	e1 := uint64(1) << 32
	cases := []struct {
		name  string
		steps []step
	}{
		{"own part and both children: one message", []step{
			{child: 2, c: ag(0, 2, 4, 5), want: combined},
			{child: -1, c: ag(0, 1), want: combined},
			{child: 3, c: ag(0, 3, 6), want: combined, sent: [][]int{{1, 2, 3, 4, 5, 6}}},
		}},
		{"a child's part sent again after the message left: passed up as it is", []step{
			{child: -1, c: ag(0, 1), want: combined},
			{child: 2, c: ag(0, 2), want: combined},
			{child: 3, c: ag(0, 3), want: combined, sent: [][]int{{1, 2, 3}}},
			{child: 3, c: ag(0, 3), want: forward},
		}},
		{"a duplicate before the message left counts once", []step{
			{child: -1, c: ag(0, 1), want: combined},
			{child: 2, c: ag(0, 2), want: combined},
			{child: 2, c: ag(0, 2), want: combined},
			{child: 3, c: ag(0, 3), want: combined, sent: [][]int{{1, 2, 3}}},
		}},
		{"a child lost: not waited for", []step{
			{child: -1, c: ag(0, 1), want: combined},
			{child: 2, c: ag(0, 2, 4), want: combined},
			{child: -2, expect: []int{2}, sent: [][]int{{1, 2, 4}}},
		}},
		{"a moved agent adopted: its part waited for", []step{
			{child: -1, c: ag(0, 1), want: combined, expect: []int{2, 3, 7}},
			{child: 2, c: ag(0, 2), want: combined, expect: []int{2, 3, 7}},
			{child: 3, c: ag(0, 3), want: combined, expect: []int{2, 3, 7}},
			{child: 7, c: ag(0, 7), want: combined, expect: []int{2, 3, 7}, sent: [][]int{{1, 2, 3, 7}}},
		}},
		{"abandoned by a recovery: the old epoch's parts dropped, the new one's kept", []step{
			{child: -1, c: ag(0, 1), want: combined},
			{child: 2, c: ag(e1, 2), want: combined},
			{child: 3, c: ag(0, 3), want: combined, sent: nil},
			{child: -2, drop: []uint64{1}, epoch: 1},
			{child: 3, c: ag(0, 3), want: abandoned, epoch: 1},
			{child: -1, c: ag(e1, 1), want: combined, epoch: 1},
			{child: 3, c: ag(e1, 3), want: combined, epoch: 1, sent: [][]int{{1, 2, 3}}},
		}},
		{"a child whose ranks all ended: its empty part lets the others' go up", []step{
			{child: -1, c: ag(1, 1), want: combined},
			{child: 2, c: ag(1, 2), want: combined},
			{child: 3, c: empty(1), want: combined, sent: [][]int{{1, 2}}},
		}},
		{"the node's own ranks all ended: its children's parts go up without it", []step{
			{child: 2, c: ag(1, 2), want: combined},
			{child: -2, waive: true, wseq: 1},
			{child: 3, c: ag(1, 3), want: combined, sent: [][]int{{2, 3}}},
			{child: 2, c: ag(2, 2), want: combined},
			{child: 3, c: ag(2, 3), want: combined, sent: [][]int{{2, 3}}},
		}},
		{"a leaf whose ranks all ended sends a part covering nothing", []step{
			{child: -2, waive: true, wseq: 4, expect: []int{}, sent: [][]int{nil}},
		}},
		{"a waiver ends with its epoch", []step{
			{child: -2, waive: true, wseq: 4, expect: []int{}, sent: [][]int{nil}},
			{child: -2, drop: []uint64{1}, epoch: 1, expect: []int{}},
			{child: 2, c: ag(e1, 2), want: combined, epoch: 1, expect: []int{2}},
			{child: -1, c: ag(e1, 1), want: combined, epoch: 1, expect: []int{2}, sent: [][]int{{1, 2}}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cb := newCombiner()
			for i, s := range tc.steps {
				for _, e := range s.drop {
					cb.abandon(e)
				}
				if s.waive {
					cb.waive(s.wseq)
				}
				if s.c != nil {
					if got := cb.add(s.child, s.c, s.epoch); got != s.want {
						t.Fatalf("step %d: verdict %d, want %d", i, got, s.want)
					}
				}
				expect := s.expect
				if expect == nil {
					expect = []int{2, 3}
				}
				var sent [][]int
				for _, c := range cb.ready(self, expect, true) {
					sent = append(sent, c.Covers)
					for j, r := range c.Ranks {
						if want := []byte{byte(r)}; !slices.Equal(c.Values[j], want) {
							t.Errorf("step %d: rank %d's value %v, want %v", i, r, c.Values[j], want)
						}
					}
				}
				if !slices.EqualFunc(sent, s.sent, slices.Equal) {
					t.Fatalf("step %d: sent up %v, want %v", i, sent, s.sent)
				}
			}
		})
	}
}

// The job's first collective (number 0 of epoch 0) at an interior node
// whose child's part arrives before the node's own ranks call it: the
// part is combined, not dropped as a copy of an answered collective, and
// the node's one message up covers both once its ranks are in (chaos:
// the first Publish hung when a replica agent's ranks were slow).
func TestFirstCollectiveChildPartBeforeOwn(t *testing.T) {
	up := &frames{}
	a := &Agent{
		spec: &proto.NodeSpec{Size: 4},
		up:   &uplink{l: proto.NewLink(up)},
		tree: &treeState{idx: 1, children: map[int]*proto.Link{2: proto.NewLink(&frames{})}, launching: map[int]bool{}},
		sup:  supervision{order: []int{2, 3}},
		coll: collectives{firstColl: make(chan struct{}), seq: map[int]uint64{}, colls: map[uint64]*localColl{}, sentUp: map[uint64][]byte{}, comb: newCombiner()},
	}
	child := &proto.Contrib{Seq: 0, Op: rankproto.OpAllgather, Covers: []int{2}, Ranks: []int{4, 5}, Values: [][]byte{{4}, {5}}}
	if a.combineChild(2, child.Encode()) {
		t.Fatal("the child's part of collective 0 passed up alone")
	}
	if fs := up.read(t); len(fs) != 0 {
		t.Fatalf("sent up before the node's own ranks called: %v", fs)
	}
	for _, r := range []int{2, 3} {
		if _, err := a.contribute(r, rankproto.OpAllgather, []byte{byte(r)}); err != nil {
			t.Fatal(err)
		}
	}
	fs := up.read(t)
	if len(fs) != 1 || fs[0].Type != proto.MContrib {
		t.Fatalf("sent up %v, want one contribution", fs)
	}
	c, err := proto.DecodeContrib(fs[0].Payload)
	if err != nil || c.Seq != 0 || !slices.Equal(c.Covers, []int{1, 2}) || !slices.Equal(c.Ranks, []int{2, 3, 4, 5}) {
		t.Fatalf("contribution %+v, %v: want collective 0 covering agents 1 and 2, ranks 2-5", c, err)
	}
}
