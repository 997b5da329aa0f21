package root

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestSuccessorPlannerSlots: a successor root's planner learns the nodes'
// slots and --oversubscribe from the job's record, and from the last
// committed recovery record that node n1's agent runs on n0 as n0+n1: n0
// is full (4 slots, 4 ranks), so a silent n2 ends the job, or with
// --oversubscribe shares n0's slots.
func TestSuccessorPlannerSlots(t *testing.T) {
	for _, over := range []bool{false, true} {
		spec, err := json.Marshal(journal.Job{ID: "j", N: 6, Restart: "rank", MaxRestarts: 3,
			Slots: map[string]int{"n0": 4, "n1": 4, "n2": 4}, Oversubscribe: over})
		if err != nil {
			t.Fatal(err)
		}
		job, err := journal.DecodeJob(spec)
		if err != nil {
			t.Fatal(err)
		}
		rec := (recovery.Checkpoint{Epoch: 1, Stage: recovery.StageResume, Version: 2,
			Agents: []recovery.AgentRecord{{Agent: 1, Node: "n0+n1", Incarnation: 2, Restarts: 1, Up: true}}}).Record()
		fe := &frontend{opts: Options{N: 6}, colls: proto.NewGather(6)}
		st := &raftstore.State{Epoch: 1, Recovery: &rec}
		for i := range 3 {
			fe.agents = append(fe.agents, &agentHandle{idx: i, name: fmt.Sprintf("n%d", i), ranks: []int{2 * i, 2*i + 1}, inc: 1})
		}
		for r := range fe.opts.N { // where they run: the agents' ranks
			st.Ranks = append(st.Ranks, raftstore.Rank{Rank: r, Node: fmt.Sprintf("n%d", r/2), ITuple: []byte("a"), Incarnation: 1})
		}
		p := fe.successorPlanner(st, job, &journal.Resumed{})
		if fe.agents[1].name != "n0+n1" || fe.agents[1].inc != 2 {
			t.Fatalf("agent 1: %q incarnation %d, want n0+n1, 2", fe.agents[1].name, fe.agents[1].inc)
		}
		acts := p.Step(recovery.AgentLost{Agent: 2, Incarnation: 1, Node: "n2", Err: "heartbeat timeout", Silent: true})
		switch f := p.Failure(); {
		case !over && (f == nil || f.Why.Kind != recovery.ReasonAgentNoPlace || f.Why.Place != (recovery.Place{Kind: recovery.PlaceNoSlots, Need: 2})):
			t.Fatalf("without --oversubscribe: failure %+v", f)
		case over && (f != nil || len(acts) == 0 || acts[0].(recovery.Record).Why.Place != (recovery.Place{Kind: recovery.PlaceShared, Node: "n0+n2", Host: "n0", Load: 4})):
			t.Fatalf("with --oversubscribe: failure %+v, actions %+v", f, acts)
		}
	}
}
