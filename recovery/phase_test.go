package recovery

import (
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// TestPhaseRecordNamesRanksAndFences: the record of each phase as the
// state log takes it: a patch carries its rows, a relaunch names the
// agents started again and the ranks, a restart that waited for fences
// says how each was confirmed (journal's FencedPrefix), the end of a
// recovery names the ranks it started again.
func TestPhaseRecordNamesRanksAndFences(t *testing.T) {
	fenced := []AgentRecord{{Agent: 1, Node: "n1", Incarnation: 2, Up: true,
		Fenced: []FenceRecord{{Node: "n1", Incarnation: 1, How: FenceSelf}}}}
	for _, c := range []struct {
		name      string
		ph        journal.RecoveryPhase
		detail    string
		rank      int
		rows      int
		recovered int
	}{
		{"a patch carries its rows", Commit{Rec: Checkpoint{Epoch: 3, Stage: StagePatch, Version: 2,
			Ranks: []RankRecord{{Rank: 5, Incarnation: 2, Addr: []byte("a")}}}}.Phase(),
			"node table version 2: rank(s) 5", 5, 1, 0},
		{"a relaunch names the agents and the ranks", Commit{Rec: Checkpoint{Epoch: 4, Stage: StageRelaunch,
			Agents: []AgentRecord{{Node: "n1", Incarnation: 1, Lost: true}}, Ranks: []RankRecord{{Rank: 2}, {Rank: 3}}}}.Phase(),
			"the agent of node n1 as incarnation 2; rank(s) 2 3", NoRank, 0, 0},
		{"a restart says how the fences were confirmed", Commit{Rec: Checkpoint{Epoch: 5, Stage: StageRestartJob, Restarts: 1, Agents: fenced},
			Recovered: []RankInc{{0, 2}, {1, 2}}}.Phase(),
			"restart 1 of the job; " + journal.FencedPrefix + "n1 self-fenced", NoRank, 0, 2},
		{"a recovery over names no rank", RecoveryOver{Epoch: 5, Stage: StageResume}.Phase(1500 * time.Millisecond),
			"every rank goes on, 1500 ms after the failure", NoRank, 0, 0},
		{"ranks started again alone", AloneOver{Epoch: 6, Ranks: []int{4}, Recovered: []RankInc{{4, 3}}}.Phase(20 * time.Millisecond),
			"rank(s) 4 started again alone, 20 ms after the failure", 4, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.ph.Detail != c.detail || c.ph.Rank != c.rank || len(c.ph.Rows) != c.rows || len(c.ph.Recovered) != c.recovered {
				t.Errorf("record %+v, want detail %q, rank %d, %d row(s), %d recovered", c.ph, c.detail, c.rank, c.rows, c.recovered)
			}
		})
	}
}

// TestRecordFailure: a failure's record in the state log, in the reason's
// words, and a stranded collective's own record with its sequence number
// split into the collective's number and epoch.
func TestRecordFailure(t *testing.T) {
	f, st := Record{Why: Reason{Kind: ReasonLaunch, Rank: NoRank, Node: "n2", Text: "no route"}, Node: "n2", Rank: NoRank}.Failure()
	if f != (journal.Failure{Node: "n2", Rank: NoRank, Message: "no route"}) || st != nil {
		t.Errorf("launch failure: %+v, %+v", f, st)
	}
	why := Reason{Kind: ReasonStranded, Rank: NoRank, Node: "n3", Seq: 3<<32 | 7, Op: "barrier"}
	f, st = Record{Why: why, Node: "n3", Rank: 4}.Failure()
	if f.Rank != 4 || f.Message != why.Words() || st == nil ||
		*st != (journal.Stranded{Node: "n3", Rank: NoRank, Seq: 7, Epoch: 3, Op: "barrier"}) {
		t.Errorf("stranded: %+v, %+v", f, st)
	}
}
