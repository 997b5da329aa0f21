package jobstate

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// unfinished writes the log of a job whose end was never recorded, as a
// crash leaves it (its files copied while the log is synced and idle),
// and returns its directory: 4 ranks on 2 nodes, with replicas root
// replicas, every rank exited if ended.
func unfinished(t *testing.T, replicas int, ended bool) string {
	t.Helper()
	dir := t.TempDir()
	j, err := journal.Open(context.Background(), journal.Config{StateDir: dir, Node: "fe", Solo: true,
		Job: journal.Job{ID: "ft-unf", Argv: []string{"./app"}, N: 4, Start: time.Now(), Replicas: replicas}})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"node1", "node2"}
	j.Plan(journal.FlatPlan(nodes))
	for i, n := range nodes {
		j.AgentUp(journal.AgentUp{Node: n, Connected: time.Now()})
		j.RanksStarted(n, []int{2 * i, 2*i + 1}, []int{100 + 2*i, 101 + 2*i})
	}
	if ended {
		for r := range 4 {
			j.RankExited(journal.RankExit{Rank: r})
		}
	}
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(t.TempDir(), "ft-unf")
	b, err := os.ReadFile(filepath.Join(dir, "ft-unf", "fe", "raft.db"))
	if err == nil {
		err = os.MkdirAll(filepath.Join(crashed, "fe"), 0o700)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(crashed, "fe", "raft.db"), b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	return crashed
}

// TestStatusUnfinished: a job whose end was never recorded says what
// became of its ranks, not that they run: cleaned up by their agents once
// the front-end (without replicas) or every root (with replicas) was
// lost; and when every rank had ended, nobody is blamed.
func TestStatusUnfinished(t *testing.T) {
	for _, c := range []struct {
		name     string
		replicas int
		ended    bool
		lost     string
		ranks    map[string]int
	}{
		{"front-end lost", 1, false, "front-end lost; ranks were cleaned up by their agents", map[string]int{"cleaned up": 4}},
		{"every root lost", 3, false, "every root lost (the front-end and its root replicas); ranks were cleaned up by their agents", map[string]int{"cleaned up": 4}},
		{"ranks ended", 1, true, "", map[string]int{"exited": 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := ReadStatus("", unfinished(t, c.replicas, c.ended))
			if err != nil {
				t.Fatal(err)
			}
			if st.State != "unfinished" || st.Lost != c.lost || !maps.Equal(st.Ranks, c.ranks) {
				t.Errorf("status: %s, lost %q, ranks %v; want lost %q, ranks %v", st.State, st.Lost, st.Ranks, c.lost, c.ranks)
			}
			if c.ended != (st.Message != "") {
				t.Errorf("message %q", st.Message)
			}
		})
	}
}
