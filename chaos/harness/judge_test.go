package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// A front-end killed before its replica initialized the log is the known
// limit, and only then: not without a root fault, not when another
// replica's file exists.
func TestChaosLostBeforeLog(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(t.TempDir(), "ft-0123456789ab")
	if err := os.MkdirAll(job, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &actionRun{Applied: trial.Applied{Action: trial.Action{Fault: trial.Root, Target: trial.Target{Node: -1, Rank: -1}}, Time: time.Now()}}
	rank := &actionRun{Applied: trial.Applied{Action: trial.Action{Fault: trial.Rank, Target: trial.Target{Node: 0, Rank: 1}}, Time: time.Now()}}
	noLog := errors.New("holds no replica's files")
	truncated := fmt.Errorf("raftstore: inspect %s: %w", job, raftstore.ErrCorrupt)
	foreign := fmt.Errorf("raftstore: inspect %s: a bbolt database without the ftlaunch bucket: %w", job, raftstore.ErrForeign)
	tr := &trialRun{jobDir: job, acts: []*actionRun{root}}
	if !tr.lostBeforeLog(noLog) {
		t.Error("root killed, no raft.db: not the known limit")
	}
	if (&trialRun{jobDir: job, acts: []*actionRun{rank}}).lostBeforeLog(noLog) {
		t.Error("no root fault: taken for the known limit")
	}
	write := func(node string) {
		if err := os.MkdirAll(filepath.Join(job, node), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(job, node, "raft.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(host)
	if !tr.lostBeforeLog(truncated) || !tr.lostBeforeLog(foreign) {
		t.Error("the front-end's file not filled yet: not the known limit")
	}
	if tr.lostBeforeLog(errors.New("permission denied")) {
		t.Error("another read error taken for the known limit")
	}
	write("node0")
	if tr.lostBeforeLog(truncated) {
		t.Error("a replica agent's file exists: taken for the known limit")
	}
}

// TestChaosRankSpans: the ranks' spans come from the rank times; those of
// an agent the trial killed or of a host it crashed, which nobody saw
// end, end at the fault's time; a stopped agent's do not.
func TestChaosRankSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := &trialRun{res: &trialResult{dir: t.TempDir()}}
	if err := os.MkdirAll(tr.ranksDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []fence.RankTime{
		{Node: "node3", Rank: 6, Inc: 1, Start: true, Time: t0},
		{Node: "node2", Rank: 4, Inc: 1, Start: true, Time: t0},
		{Node: "node4", Rank: 6, Inc: 2, Start: true, Time: t0.Add(3 * time.Second)},
	} {
		if err := fence.AppendRankTime(tr.ranksDir(), rt); err != nil {
			t.Fatal(err)
		}
	}
	crash := t0.Add(time.Second)
	tr.res.applied = []trial.Applied{
		{Action: trial.Action{Fault: trial.Node, Target: trial.Target{Node: 3, Rank: -1}}, Time: crash},
		{Action: trial.Action{Fault: trial.Stop, Target: trial.Target{Node: 2, Rank: -1}}, Time: crash},
	}
	tr.rankSpans()
	ends := map[string]time.Time{}
	for _, sp := range tr.res.outcome.Spans {
		ends[fmt.Sprintf("%s/%d/%d", sp.Node, sp.Rank, sp.Inc)] = sp.End
	}
	if len(ends) != 3 || !ends["node3/6/1"].Equal(crash) || !ends["node2/4/1"].IsZero() || !ends["node4/6/2"].IsZero() {
		t.Fatalf("spans %+v", tr.res.outcome.Spans)
	}
	if ov := trial.Overlap(tr.res.outcome.Spans); ov != "" {
		t.Errorf("overlap %s", ov)
	}
}
