package recovery

import (
	"fmt"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// TestNarrate pins the words the root tells the planner's actions in
// (with --verbose; warnings always), and which are warnings.
func TestNarrate(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("n%d", i) }
	since := func(time.Time) time.Duration { return 1234567 * time.Microsecond }
	for _, c := range []struct {
		act  Action
		want string
		warn bool
	}{
		{Suspend{Epoch: 3}, "recovery: suspending every rank (epoch 3)", false},
		{Respawn{Rank: 4, Agent: 2, Incarnation: 2}, "recovery: starting rank 4 again on n2 as incarnation 2", false},
		{Patch{Version: 3, Rows: make([]RankRecord, 2)}, "recovery: patching the node table to version 3 (2 row(s))", false},
		{RestartJob{Epoch: 2, Restarts: 1}, "recovery: restarting every rank (restart 1, epoch 2)", false},
		{RestartJob{Deferred: true}, "recovery: every agent is up: restarting every rank", false},
		{Relaunch{Agent: 1, Node: "n1", Incarnation: 2, Epoch: 3}, "recovery: starting the agent of node n1 again as incarnation 2 (epoch 3)", false},
		{Relaunch{Agent: 1, Node: "s0", Incarnation: 2, Epoch: 3}, "recovery: starting the agent of node n1 on spare node s0 as incarnation 2 (epoch 3)", false},
		{Relaunch{Agent: 1, Node: "n0+n1", Incarnation: 2, Epoch: 3}, "recovery: starting the agent of node n1 on surviving node n0, as node n0+n1, as incarnation 2 (epoch 3)", false},
		{Fence{Node: "n1", Incarnation: 1}, "", false},
		{Fence{Node: "n1", Incarnation: 1, Again: true}, "recovery: fencing node n1 (incarnation 1), which the lost root had not seen fenced", false},
		{Leads{Epoch: 4, Stage: StageRespawn}, "carrying on the recovery of epoch 4 at its respawn phase", true},
		{Leads{}, "", false},
		{AwaitOrphans{Agent: 0, Moves: []OrphanMove{{Orphan: 2, Backup: 1}, {Orphan: 6, Backup: 3, Fallback: true}}},
			"recovery: node n0 was lost with agents below it; moving them to new parents: n2 to n1, n6 to a fallback parent (its backup is lost too)", false},
		{OrphanLate{Orphan: 2, Agent: 0}, "node n2 did not reach a new parent in time after the loss of node n0: lost with it", true},
		{OrphansArrived{Agent: 0}, "recovery: every agent below node n0 reached a new parent in 1.235s", false},
		{Moved{Agent: 2, From: 0, To: 1}, "node n2 moved to its backup parent n1 (node n0 was lost)", true},
		{Moved{Agent: 6, From: 2, To: 0, Fallback: true}, "node n6 moved to its fallback parent n0 (node n2 was lost)", true},
		{Moved{Agent: 6, From: 2, To: topology.Root}, "node n6 moved to the root, its last fallback parent (node n2 and its backup parent were lost)", true},
		{MoveIgnored{Agent: 2, Parent: topology.Root, Incarnation: 1}, "recovery: node n2 (incarnation 1) reached its new parent the root after it was declared lost: ignored", false},
		{MoveFailed{Agent: 2, Parent: 6, Err: "loop"}, "node n2 cannot move under n6: loop", true},
		{Suspect{Agent: 2, Parent: 0}, "gossip: node n2 is dead; its parent n0 looks at its link", false},
		{DeclareLost{Agent: 1}, "gossip: node n1 did not ask to be adopted", false},
		{DeclareLost{Agent: 1, Linked: true}, "", false},
		{CheckAgain{Agent: 1, Quiet: time.Second, After: 2 * time.Second}, "gossip: node n1's link has been quiet 1s; looking again in 2s", false},
		{CheckAgain{Agent: 1, Watched: true}, "", false},
		{StandbysUp{N: 4}, "every standby link to a backup parent is up (4)", false},
		{Terminate{}, "", false},
	} {
		if got, warn := Narrate(c.act, name, since); got != c.want || warn != c.warn {
			t.Errorf("%T %+v: %q (warn %v), want %q (warn %v)", c.act, c.act, got, warn, c.want, c.warn)
		}
	}
	if got := (Redeal{Lost: []int{2, 6}}).Change(name); got != "lost node(s) n2, n6 start again as children of the root; backup parents dealt again" {
		t.Errorf("redeal: %q", got)
	}
}
