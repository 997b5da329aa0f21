package root

import "testing"

// Which agent a request for adoption comes from: its node's certificate
// names the agent's current node, or the incarnation asking is older than
// the current one (a lost incarnation, perhaps on the node the agent ran
// on before a spare took it over), which the planner can only fence.
func TestAskedBy(t *testing.T) {
	agents := []*agentHandle{
		{idx: 0, name: "node0", inc: 1},
		{idx: 1, name: "node7", inc: 2}, // started again on spare node7
	}
	for _, tc := range []struct {
		name string
		idx  int
		peer string
		inc  uint64
		want int // -1: none
	}{
		{"the agent on its node", 0, "node0", 1, 0},
		{"the current incarnation on the spare", 1, "node7", 2, 1},
		{"the lost incarnation on the node it left", 1, "node6", 1, 1},
		{"a newer incarnation on another node", 1, "node6", 3, -1},
		{"the current incarnation on another node", 0, "node5", 1, -1},
		{"no such agent", 2, "node2", 1, -1},
		{"a negative index", -1, "node0", 1, -1},
		{"no certificate name", 1, "", 1, -1},
	} {
		a := askedBy(agents, tc.idx, tc.peer, tc.inc)
		got := -1
		if a != nil {
			got = a.idx
		}
		if got != tc.want {
			t.Errorf("%s: agent %d, want %d", tc.name, got, tc.want)
		}
	}
}
