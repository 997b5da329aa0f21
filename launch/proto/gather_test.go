package proto

import (
	"slices"
	"testing"

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
