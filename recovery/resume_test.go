package recovery

import (
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/topology"
)

// TestResumedTreeAndPlanner: a successor's tree and planner come from the
// replicated state alone: each agent below its recorded parent (the root
// when none) with its backup; the agents up, the ranks that ran (their
// processes) and ended (how: the summary of failed ranks), and the last
// committed recovery's epoch.
func TestResumedTreeAndPlanner(t *testing.T) {
	r := &journal.Resumed{
		Agents: []journal.ResumedAgent{{Name: "n0", Parent: -1, Backup: -1, Up: true, Ranks: []int{0}},
			{Name: "n1", Parent: 0, Backup: -1, Ranks: []int{1}}, {Name: "n2", Parent: -1, Backup: 0, Up: true, Ranks: []int{2}}},
		Ranks: []journal.ResumedRank{{Node: 0, PID: 7, Started: true, Ended: true, Code: 3}, {Node: 1}, {Node: 2, PID: 9, Started: true}},
		Ended: []int{0}, Failed: []int{0},
	}
	tr, err := ResumedTree(r)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]int{{topology.Root, topology.None}, {0, topology.None}, {topology.Root, 0}} {
		if got := [2]int{tr.Parent(i), tr.Backup(i)}; got != want {
			t.Errorf("agent %d: parent, backup %v, want %v", i, got, want)
		}
	}
	if _, err := ResumedTree(&journal.Resumed{Agents: []journal.ResumedAgent{{Name: "a", Parent: 0}}}); err == nil {
		t.Error("an agent its own parent: no error")
	}
	rec := (Checkpoint{Epoch: 5, Stage: StageResume, Version: 2}).Record()
	st := &raftstore.State{Epoch: 6, Recovery: &rec, Ranks: make([]raftstore.Rank, 3)}
	p := ResumedPlanner(Config{Policy: Rank, Ranks: 3, Agents: 3, RankAgent: []int{0, 1, 2}, Nodes: []string{"n0", "n1", "n2"}, Tree: tr}, st, r)
	for i, up := range []bool{true, false, true} {
		if got := p.Links().Link(i).Up; got != up {
			t.Errorf("agent %d up %v, want %v", i, got, up)
		}
	}
	led := p.Ledger()
	if !led.Ended(0) || led.Ended(2) || !led.Started(2) || led.Started(1) || led.Pid(2) != 9 {
		t.Errorf("ledger: ended %v %v, started %v %v, pid %d", led.Ended(0), led.Ended(2), led.Started(2), led.Started(1), led.Pid(2))
	}
	// A rank that failed before the takeover is in the job's summary of
	// failed ranks, by the code the state log has.
	if got := led.Failed(func(int) string { return "n0" }); len(got) != 1 || got[0] != (RankExited{Rank: 0, Node: "n0", Code: 3}) {
		t.Errorf("failed %+v, want rank 0 with code 3", got)
	}
	if s := p.Status(); !s.Resumed || s.Epoch != 5 {
		t.Errorf("status %+v: want resumed at epoch 5", s)
	}
}
