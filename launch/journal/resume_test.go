package journal

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// TestResume: a successor's view of the job from the replicated state:
// the tree by index, the agents the front-end sent their share, the ranks
// by the placement or, without one, by the node table, which ended
// (failed: a non-zero code), and the node table once one was published.
func TestResume(t *testing.T) {
	st := &raftstore.State{
		Plan:   raftstore.Plan{Nodes: []raftstore.PlanNode{{Name: RootName}, {Name: "n0"}, {Name: "n1", Backup: "n2"}, {Name: "n2", Primary: "n0", Backup: "n1"}}},
		Agents: map[string]raftstore.Agent{"n0": {Node: "n0", Addr: "10.0.0.1:7"}, "n2": {Node: "n2", Addr: "10.0.0.3:7"}},
		Ranks: []raftstore.Rank{
			{Rank: 0, Node: "n0", PID: 10, State: raftstore.RankRunning},
			{Rank: 1, Node: "n1", PID: 11, State: raftstore.RankExited},
			{Rank: 2, Node: "n2", PID: 12, State: raftstore.RankFailed, ExitCode: 3},
			{Rank: 3}, // not recorded before the front-end died
		},
	}
	r, err := Resume(st, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAgents := []ResumedAgent{
		{Name: "n0", Parent: -1, Backup: -1, Up: true, Addr: "10.0.0.1:7", Ranks: []int{0}},
		{Name: "n1", Parent: -1, Backup: 2, Ranks: []int{1}},
		{Name: "n2", Parent: 0, Backup: 1, Up: true, Addr: "10.0.0.3:7", Ranks: []int{2}},
	}
	wantRanks := []ResumedRank{{Node: 0, PID: 10, Started: true}, {Node: 1, PID: 11, Started: true, Ended: true},
		{Node: 2, PID: 12, Started: true, Ended: true, Code: 3}, {Node: -1}}
	if !reflect.DeepEqual(r.Agents, wantAgents) || !reflect.DeepEqual(r.Ranks, wantRanks) ||
		!reflect.DeepEqual(r.Ended, []int{1, 2}) || !reflect.DeepEqual(r.Failed, []int{2}) {
		t.Errorf("resumed %+v\nwant agents %+v, ranks %+v, ended [1 2], failed [2]", r, wantAgents, wantRanks)
	}
	if r.Table != nil {
		t.Errorf("table %q before one was published", r.Table)
	}
	// The replica spec's placement places rank 3, which the table lacks;
	// a published table is every rank's I-tuple.
	st.Ranks[2].ITuple = []byte("t2")
	r, err = Resume(st, 4, [][]int{{0, 3}, {1}, {2}})
	if err != nil || !reflect.DeepEqual(r.Table, [][]byte{nil, nil, []byte("t2"), nil}) {
		t.Errorf("table %q, %v", r.Table, err)
	}
	if err != nil || r.Ranks[3].Node != 0 || !reflect.DeepEqual(r.Agents[0].Ranks, []int{0, 3}) {
		t.Errorf("with a placement: %+v, %v", r, err)
	}
	for name, c := range map[string]struct {
		st        *raftstore.State
		n         int
		placement [][]int
	}{
		"no plan":             {&raftstore.State{}, 4, nil},
		"a table of 4 ranks":  {st, 5, nil},
		"a rank placed twice": {st, 4, [][]int{{0, 1}, {1}, {2, 3}}},
	} {
		if _, err := Resume(c.st, c.n, c.placement); err == nil {
			t.Errorf("%s: resumed", name)
		}
	}
}

// TestTreePlan: a tree's plan record names each agent's parent and backup
// parent (the root's name for the root, none left empty) and the replica
// hosts, in index order.
func TestTreePlan(t *testing.T) {
	parents, backups := []int{-1, -1, 0}, []int{-2, 2, 1}
	p := TreePlan("kary:2", []string{"n0", "n1", "n2"},
		func(i int) int { return parents[i] }, func(i int) int { return backups[i] }, func(i int) bool { return i == 1 })
	want := Plan{Kind: "kary:2", Root: RootName, Replicas: []string{"n1"}, Nodes: []PlanNode{
		{Name: "n0", Primary: RootName}, {Name: "n1", Primary: RootName, Backup: "n2"}, {Name: "n2", Primary: "n0", Backup: "n1"}}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("plan %+v\nwant %+v", p, want)
	}
}
