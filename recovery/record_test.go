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

// TestResumeConfig: a successor's planner takes every rank's incarnation
// from the replicated table, under --restart rank its restarts too, and
// knows the table was published once a rank's row has its address.
func TestResumeConfig(t *testing.T) {
	st := &raftstore.State{Ranks: []raftstore.Rank{{Rank: 0, Incarnation: 1}, {Rank: 1, Incarnation: 3, ITuple: []byte("a")}, {Rank: 2, Incarnation: 9}}}
	cfg := ResumeConfig(Config{Policy: Rank, Ranks: 2, Launching: true}, st)
	if !cfg.Resumed || cfg.Launching || !cfg.TableReady {
		t.Errorf("resumed %v, launching %v, table ready %v", cfg.Resumed, cfg.Launching, cfg.TableReady)
	}
	if !reflect.DeepEqual(cfg.Incarnations, []uint64{1, 3}) || !reflect.DeepEqual(cfg.RankRestarts, []int{0, 2}) {
		t.Errorf("incarnations %v, restarts %v", cfg.Incarnations, cfg.RankRestarts)
	}
	cfg = ResumeConfig(Config{Policy: Job, Ranks: 3}, &raftstore.State{Ranks: st.Ranks[:1]})
	if cfg.TableReady || cfg.RankRestarts != nil || !reflect.DeepEqual(cfg.Incarnations, []uint64{1, 0, 0}) {
		t.Errorf("job policy, no table: %+v", cfg)
	}
}
