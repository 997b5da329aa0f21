package root

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestRecordRoundTrip: a checkpoint the root commits comes back whole to
// a successor's planner from the typed record, at its own epoch.
func TestRecordRoundTrip(t *testing.T) {
	for stage := recovery.Stage(0); stage <= recovery.StageRelaunch; stage++ {
		in := recovery.Checkpoint{Epoch: 4, Stage: stage, Version: 3, Restarts: 2, Alone: stage == recovery.StageResume,
			Ranks: []recovery.RankRecord{{Rank: 1, Agent: 0, Incarnation: 2, Addr: []byte("a"), Restarts: 1}, {Rank: 2, Incarnation: 1, Failed: true}},
			Agents: []recovery.AgentRecord{{Agent: 1, Node: "n1", Incarnation: 2, Restarts: 1, Lost: true,
				Unfenced: []recovery.FenceRecord{{Node: "n1", Incarnation: 1}}, Fenced: []recovery.FenceRecord{{Node: "n0", Incarnation: 1, How: recovery.FenceSelf}}}}}
		rec := encodeRecord(in)
		out, ok := checkpointOf(&raftstore.State{Epoch: 6, Recovery: &rec}) // two takeovers since
		if !ok || !reflect.DeepEqual(out, in) {
			t.Errorf("stage %v: got %+v, want %+v", stage, out, in)
		}
	}
	if _, ok := checkpointOf(&raftstore.State{Epoch: 3}); ok {
		t.Error("a checkpoint from a state without a recovery record")
	}
}
