package journal

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// A state directory that is a file cannot hold the job: with Fallback the
// journal keeps the state in memory, commits as usual and leaves nothing;
// without it Open fails.
func TestJournalInMemory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{StateDir: file, Node: "fe", Job: Job{ID: "ft-mem", N: 8}}
	if _, err := Open(context.Background(), cfg); err == nil {
		t.Fatal("Open without Fallback succeeded in a file")
	}
	cfg.Fallback = true
	j, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if j.InMemory() == nil || j.Dir() != "" || j.ReplicaDir() != "" {
		t.Errorf("InMemory %v, Dir %q, ReplicaDir %q", j.InMemory(), j.Dir(), j.ReplicaDir())
	}
	launch(j, []string{"node0", "node1"}, 4, 5)
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	exited := 0
	j.Replica().FSM().View(func(s *raftstore.State) {
		for _, r := range s.Ranks {
			if r.State == raftstore.RankExited {
				exited++
			}
		}
	})
	if err := j.Close(context.Background(), 3, "rank 5 failed"); err != nil {
		t.Fatal(err)
	}
	if exited == 0 {
		t.Errorf("no rank exits committed in memory")
	}
}

func TestPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	mk := func(name string, age time.Duration) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "node"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "node", "raft.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for i, name := range []string{"ft-a", "ft-b", "ft-c", "ft-d", "ft-e"} {
		mk(name, time.Duration(i)*time.Minute) // ft-a newest
	}
	mk("other", time.Hour) // not a job: never touched
	f, err := os.Open(filepath.Join(dir, "ft-d", "node", "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if removed, err := Prune(dir, 0); err != nil || len(removed) != 0 {
		t.Fatalf("keep 0 removed %q, %v", removed, err)
	}
	removed, err := Prune(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names(removed), " "); got != "ft-c ft-e" {
		t.Errorf("removed %q, want ft-c and ft-e (ft-d is locked)", got)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if got := strings.Join(left, " "); got != "ft-a ft-b ft-d other" {
		t.Errorf("left %q", got)
	}
}

func names(paths []string) []string {
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	return out
}
