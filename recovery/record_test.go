package recovery

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// TestRecordRoundTrip: a checkpoint the root commits comes back whole to
// a successor's planner from the typed record, at its own epoch.
func TestRecordRoundTrip(t *testing.T) {
	for stage := Stage(0); stage <= StageRelaunch; stage++ {
		in := Checkpoint{Epoch: 4, Stage: stage, Version: 3, Restarts: 2, Alone: stage == StageResume,
			Ranks: []RankRecord{{Rank: 1, Agent: 0, Incarnation: 2, Addr: []byte("a"), Restarts: 1}, {Rank: 2, Incarnation: 1, Failed: true}},
			Agents: []AgentRecord{{Agent: 1, Node: "n1", Incarnation: 2, Restarts: 1, Lost: true,
				Unfenced: []FenceRecord{{Node: "n1", Incarnation: 1}}, Fenced: []FenceRecord{{Node: "n0", Incarnation: 1, How: FenceSelf}}}}}
		rec := in.Record()
		out, ok := CheckpointOf(&raftstore.State{Epoch: 6, Recovery: &rec}) // two takeovers since
		if !ok || !reflect.DeepEqual(out, in) {
			t.Errorf("stage %v: got %+v, want %+v", stage, out, in)
		}
	}
	if _, ok := CheckpointOf(&raftstore.State{Epoch: 3}); ok {
		t.Error("a checkpoint from a state without a recovery record")
	}
}
