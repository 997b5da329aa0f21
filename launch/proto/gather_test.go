package proto

import (
	"reflect"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// TestGather: the root merges contributions by the agents they cover: agents 0 and 1
// are its children, 2 below 0 and 3 below 1, ranks 2i and 2i+1 on agent
// i; a contribution sent again (after a move or a failover) counts once,
// one of an abandoned epoch not at all.
func TestGather(t *testing.T) {
	type msg struct {
		from   int
		seq    uint64
		covers []int
	}
	e1 := uint64(1) << 32
	cases := []struct {
		name     string
		epoch    uint64
		msgs     []msg
		answered bool
		got      int // agents covered (answered: all four)
		received int
	}{
		{"one message per child", 0, []msg{{0, 0, []int{0, 2}}, {1, 0, []int{1, 3}}}, true, 4, 2},
		{"a moved agent's part sent again after its old parent's", 0,
			[]msg{{0, 0, []int{0, 2}}, {2, 0, []int{2}}, {1, 0, []int{1, 3}}}, true, 4, 3},
		{"a lost child's subtree sent through its backup parent", 0,
			[]msg{{0, 0, []int{0}}, {1, 0, []int{1, 3}}, {2, 0, []int{2}}}, true, 4, 3},
		{"a contribution without covers covers its sender", 0,
			[]msg{{0, 0, nil}, {1, 0, []int{1, 3, 2}}}, true, 4, 2},
		{"waiting for one agent", 0, []msg{{0, 0, []int{0}}, {1, 0, []int{1, 3}}, {1, 0, []int{1, 3}}}, false, 3, 3},
		{"a part covering nothing (its ranks all ended) opens nothing", 0, []msg{{0, 0, []int{}}}, false, -1, 0},
		{"an abandoned epoch's part ignored", 1, []msg{{0, 0, []int{0, 2}}, {1, e1, []int{1, 3}}}, false, 2, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGather(8)
			g.SetEpoch(tc.epoch)
			var answer Gathered
			add := func(from int, c *Contrib) {
				if r := g.Add(from, from, c, 4, 4); r.Answer != nil {
					answer = r
				}
			}
			var seq uint64
			for _, m := range tc.msgs {
				seq = m.seq
				c := &Contrib{Seq: m.seq, Op: rankproto.OpAllgather, Covers: m.covers}
				if m.covers != nil && len(m.covers) == 0 {
					add(m.from, c)
					continue
				}
				for _, x := range append([]int{m.from}, m.covers...) {
					if !slices.Contains(c.Ranks, 2*x) {
						c.Ranks = append(c.Ranks, 2*x, 2*x+1)
						c.Values = append(c.Values, []byte{byte(2 * x)}, []byte{byte(2*x + 1)})
					}
				}
				add(m.from, c)
			}
			if g.answered[seq] != tc.answered {
				t.Fatalf("answered %v, want %v", g.answered[seq], tc.answered)
			}
			if tc.answered {
				if answer.Msgs != tc.received || answer.Covered != 4 {
					t.Errorf("answered from %d message(s) covering %d agent(s), want %d covering 4", answer.Msgs, answer.Covered, tc.received)
				}
				if len(g.Answers()) != 1 {
					t.Errorf("%d answers kept, want 1", len(g.Answers()))
				}
				return
			}
			rc := g.open[seq]
			if tc.got < 0 {
				if rc != nil {
					t.Fatalf("collective %d opened: %+v", seq, rc)
				}
				return
			}
			if rc == nil {
				t.Fatalf("collective %d not open", seq)
			}
			if len(rc.from) != tc.got || rc.msgs != tc.received {
				t.Errorf("covering %d agents from %d message(s), want %d from %d", len(rc.from), rc.msgs, tc.got, tc.received)
			}
		})
	}
}

// TestCollStatsTotalByKind: the answered collectives are totalled in all
// and by kind (the state log's record), in the order of the kinds' names.
func TestCollStatsTotalByKind(t *testing.T) {
	var s CollStats
	if s.Words() != "0 answered; the root received 0 message(s) for them and sent down 0 byte(s)" || s.Totals() != nil {
		t.Errorf("none: %q %v", s.Words(), s.Totals())
	}
	s.Add(rankproto.OpRing, Gathered{Msgs: 2, Covered: 4}, 100)
	s.Add(OpPMIBarrier, Gathered{Msgs: 3, Covered: 3}, 10)
	s.Add(rankproto.OpRing, Gathered{Msgs: 1, Covered: 4}, 50)
	want := []journal.CollTotal{{Kind: "pmi-barrier", Count: 1, Messages: 3, Agents: 3, BytesDown: 10}, {Kind: "ring", Count: 2, Messages: 3, Agents: 8, BytesDown: 150}}
	if got := s.Totals(); !slices.Equal(got, want) {
		t.Errorf("totals %+v, want %+v", got, want)
	}
	if s.Answered != 3 || s.Msgs != 6 || s.Down != 160 {
		t.Errorf("in all %+v", s)
	}
	if w := s.Words(); w != "3 answered; the root received 6 message(s) for them and sent down 160 byte(s) (pmi-barrier: 1, 3 message(s) covering 3 agent(s), 10 byte(s) down; ring: 2, 3 message(s) covering 8 agent(s), 150 byte(s) down)" {
		t.Errorf("words %q", w)
	}
}

// TestGatherOpen: a collective in flight names the agents it waits for,
// and says at most 8 of them.
func TestGatherOpen(t *testing.T) {
	g := NewGather(8)
	for _, x := range []int{0, 1} {
		g.Add(x, x, &Contrib{Seq: 5, Op: rankproto.OpAllgather, Ranks: []int{2 * x, 2*x + 1}, Values: [][]byte{{0}, {1}}}, 4, 4)
	}
	open := g.Open([]string{"n0", "n1", "n2", "n3"})
	want := OpenColl{Kind: CollKind(rankproto.OpAllgather), Seq: 5, Joined: 2, Missing: []string{"n2", "n3"}}
	if len(open) != 1 || !reflect.DeepEqual(open[0], want) {
		t.Fatalf("open %+v, want [%+v]", open, want)
	}
	if got, w := open[0].Words(), "at the timeout "+want.Kind+" #5 was open: 2 of 4 agent(s) had joined; waiting for n2, n3"; got != w {
		t.Errorf("words %q, want %q", got, w)
	}
	many := OpenColl{Kind: "barrier", Seq: 1, Joined: 1, Missing: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}}
	if got, w := many.Words(), "at the timeout barrier #1 was open: 1 of 11 agent(s) had joined; waiting for a, b, c, d, e, f, g, h and 2 more"; got != w {
		t.Errorf("words %q, want %q", got, w)
	}
}
