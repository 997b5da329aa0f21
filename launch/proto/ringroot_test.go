package proto

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/topology"
)

// ringAnswered is a Gather of a ring of 8 ranks over four agents (rank r
// on agent r/2; agents 0 and 1 the root's children, 2 below 0 and 3 below
// 1) that answered ring 0 from one part per child: it holds the values of
// the runs' ends (ranks 0, 1, 4, 5 through child 0; 2, 3, 6, 7 through 1).
func ringAnswered(t *testing.T) (*Gather, Gathered) {
	t.Helper()
	g := NewGather(8)
	var got Gathered
	for from, covers := range [][]int{{0, 2}, {1, 3}} {
		c := &Contrib{Seq: 0, Op: rankproto.OpRing, Covers: covers}
		c.Spans = SpansOf([]int{2 * covers[0], 2*covers[0] + 1, 2 * covers[1], 2*covers[1] + 1})
		for _, r := range SpanEnds(c.Spans) {
			c.Ranks, c.Values = append(c.Ranks, r), append(c.Values, []byte(fmt.Sprint(r)))
		}
		got = g.Add(from, from, c, 4, 4)
	}
	if got.Answer == nil {
		t.Fatal("ring not answered")
	}
	return g, got
}

// TestRingSplitSendsEachChildWhatItsSubtreeNeeds: each child of the root
// gets the values of the neighbours of its subtree's runs, as the tree is
// now and as its parts came up.
func TestRingSplitSendsEachChildWhatItsSubtreeNeeds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parent2 int // agent 2's parent (0 as launched)
		noVia   int // a child none of whose parts came up (-1: none)
		want    map[int][]int
	}{
		{"as the parts came up", 0, -1, map[int][]int{0: {2, 3, 6, 7}, 1: {0, 1, 4, 5}}},
		// Agent 2 moved below child 1: child 1's ranks are now 2-7, and
		// its parts' runs (2-3, 6-7) still need 0, 1, 4 and 5.
		{"an agent moved to the other child", 1, -1, map[int][]int{0: {2, 3, 6, 7}, 1: {0, 1, 4, 5}}},
		{"by the tree as it is now alone", 1, 0, map[int][]int{0: {2, 7}, 1: {0, 1, 4, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree, err := topology.FromEdges("kary:2", []topology.Edge{
				{Name: "node0", Parent: topology.Root, Backup: topology.None},
				{Name: "node1", Parent: topology.Root, Backup: topology.None},
				{Name: "node2", Parent: tc.parent2, Backup: 1 - tc.parent2},
				{Name: "node3", Parent: 1, Backup: 0},
			})
			if err != nil {
				t.Fatal(err)
			}
			g, got := ringAnswered(t)
			delete(got.Via, tc.noVia)
			parts := g.RingSplit(0, got, tree, func(r int) int { return r / 2 })
			if len(parts) != 2 {
				t.Errorf("parts for %d children, want 2", len(parts))
			}
			for child, want := range tc.want {
				if p := parts[child]; p == nil || !slices.Equal(p.Ranks, want) || p.Size() != 8 {
					t.Errorf("child %d sent %+v, want the values of %v", child, p, want)
				}
			}
		})
	}
}

// TestRingAskAnsweredFromWhatTheRootHolds: an ask for values the root
// holds is answered at once; one for values it lacks recalls them from
// every agent, once per value lacked.
func TestRingAskAnsweredFromWhatTheRootHolds(t *testing.T) {
	g, _ := ringAnswered(t)
	did := g.RingAsk(3, RingAsk{Seq: 0, Ranks: []int{5}}, []int{0, 1, 2, 3})
	if did.Answer == nil || !slices.Equal(did.Answer.Ranks, []int{5}) || did.Recall != nil {
		t.Fatalf("held value: %+v", did)
	}
	delete(g.RingKnown(0), 2)
	did = g.RingAsk(2, RingAsk{Seq: 0, Ranks: []int{2, 3}}, []int{0, 1, 2, 3})
	if did.Answer != nil || did.Recall == nil || !slices.Equal(did.Recall.Ranks, []int{2}) || did.Lack != 1 {
		t.Fatalf("lacked value: %+v", did)
	}
	if again := g.RingAsk(0, RingAsk{Seq: 0, Ranks: []int{2}}, []int{0, 1, 2, 3}); again.Answer != nil || again.Recall != nil {
		t.Errorf("asked again while recalled: %+v", again)
	}
	if !slices.Equal(g.RingRecalls(), []uint64{0}) {
		t.Errorf("recalls %v", g.RingRecalls())
	}
}

// TestRingRecallDoneOnceEveryAgentAnsweredOrWasLost: a recall ends once
// every value is held, or every agent it waits for answered or can no
// longer; a value no agent held comes empty.
func TestRingRecallDoneOnceEveryAgentAnsweredOrWasLost(t *testing.T) {
	up := func(lost ...int) func(int) bool { return func(x int) bool { return !slices.Contains(lost, x) } }
	for _, tc := range []struct {
		name    string
		answers map[int]map[int][]byte // by agent: the values it sends
		lost    []int
		done    bool
		want    []string // the fill's values of ranks 2, 3, 6
		lostN   int
	}{
		{"waits for agent 3", map[int]map[int][]byte{1: {2: []byte("2")}, 0: nil, 2: nil}, nil, false, nil, 0},
		{"agent 3 lost: 6 comes empty", map[int]map[int][]byte{1: {2: []byte("2")}, 0: nil, 2: nil}, []int{3}, true, []string{"2", "3", ""}, 1},
		{"every value held before all answered", map[int]map[int][]byte{1: {2: []byte("2")}, 3: {6: []byte("6")}}, nil, true, []string{"2", "3", "6"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := ringAnswered(t)
			delete(g.RingKnown(0), 2)
			delete(g.RingKnown(0), 6)
			if did := g.RingAsk(2, RingAsk{Seq: 0, Ranks: []int{2, 3, 6}}, []int{0, 1, 2, 3}); !slices.Equal(did.Recall.Ranks, []int{2, 6}) {
				t.Fatalf("recall of %+v", did.Recall)
			}
			for x, vals := range tc.answers {
				if !g.RingValues(x, RingPart(0, 8, vals, []int{2, 6})) {
					t.Fatalf("agent %d's answer: no recall", x)
				}
			}
			fill, done := g.RingRecallDone(0, up(tc.lost...))
			if done != tc.done {
				t.Fatalf("done %v, want %v", done, tc.done)
			}
			if !done {
				return
			}
			res := fill.To[2]
			if len(fill.To) != 1 || res == nil || !slices.Equal(res.Ranks, []int{2, 3, 6}) || fill.Lost != tc.lostN {
				t.Fatalf("fill %+v", fill)
			}
			for i, want := range tc.want {
				if string(res.Values[i]) != want {
					t.Errorf("rank %d's value %q, want %q", res.Ranks[i], res.Values[i], want)
				}
			}
			if len(g.RingRecalls()) != 0 {
				t.Errorf("recalls left: %v", g.RingRecalls())
			}
		})
	}
}
