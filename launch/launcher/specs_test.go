package launcher

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// TestChildSpecs: each agent started is described by its own name, with
// credentials issued for it and its subtree, which it starts in turn.
func TestChildSpecs(t *testing.T) {
	ca, err := secure.NewJobCA("job")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := topology.FromEdges("test", []topology.Edge{
		{Name: "n0", Parent: topology.Root, Backup: topology.None},
		{Name: "n1", Parent: 0, Backup: topology.None},
		{Name: "n2", Parent: 1, Backup: topology.None},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a", "b", "c"} // the root's names (a spare's, say), not the tree's
	cs, err := ChildSpecs(ca, tr, func(i int) string { return names[i] }, []int{0, 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].Idx != 0 || cs[0].Name != "a" || !slices.Equal(cs[0].Sub, []int{1, 2}) ||
		cs[1].Idx != 2 || cs[1].Name != "c" || len(cs[1].Sub) != 0 {
		t.Fatalf("specs %+v", cs)
	}
	for _, c := range cs {
		if _, err := secure.UnmarshalCredentials(c.Creds); err != nil {
			t.Errorf("%s: credentials: %v", c.Name, err)
		}
	}
}

// TestSuccessorSpec: a successor tells agents to start their children as
// its own agent was told, in this root's batches for a leaf launcher only.
func TestSuccessorSpec(t *testing.T) {
	tmpl := proto.LaunchSpec{Mode: "ssh", AgentPath: "/ft", SSHConfig: "/cfg", Batch: 4}
	g := Agents{Batch: 8}
	if got := g.SuccessorSpec(tmpl, false); got.Batch != 0 || got.Mode != "ssh" || got.SSHConfig != "/cfg" {
		t.Errorf("interior: %+v", got)
	}
	if got := g.SuccessorSpec(tmpl, true); got.Batch != 8 || got.AgentPath != "/ft" {
		t.Errorf("leaf launcher: %+v", got)
	}
}

// TestFenceEndWords: a fence's end as the user is told it: a failed one is
// a warning.
func TestFenceEndWords(t *testing.T) {
	for _, c := range []struct {
		rec  journal.Fence
		want string
		warn bool
	}{
		{journal.Fence{Node: "n3", Incarnation: 2, Took: 1234567 * time.Microsecond, Result: "killed 2 process(es)"},
			"fenced node n3 (incarnation 2) in 1.235s: killed 2 process(es)", false},
		{journal.Fence{Node: "n3", Incarnation: 1, Err: errors.New("fence node n3: i/o timeout").Error()},
			"fence node n3: i/o timeout; the agent kills its ranks itself if it hears from the root again", true},
	} {
		if w, warn := (FenceEnd{Record: c.rec}).Words(); w != c.want || warn != c.warn {
			t.Errorf("%+v: %q (warning %v), want %q (%v)", c.rec, w, warn, c.want, c.warn)
		}
	}
}

// TestUpWords: how --verbose says an agent came up.
func TestUpWords(t *testing.T) {
	up := proto.ChildUp{SSH: 12300 * time.Microsecond, Attempts: 2, Up: 45600 * time.Microsecond}
	for _, c := range []struct {
		local *LocalAgent
		want  string
	}{
		{&LocalAgent{InProcess: true}, "in the front-end's process, on a socket pair"},
		{&LocalAgent{}, "a local process on a socket pair"},
		{nil, "ssh 12.3 ms, 2 attempt(s), connected 45.6 ms after its launcher began"},
	} {
		if got := UpWords(c.local, journal.StartSSH, up); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// TestRelaunchSpec: a relaunched agent is told its incarnation, where the
// recovery stands, the node table and the lost incarnation of each of its
// ranks, in its ranks' order.
func TestRelaunchSpec(t *testing.T) {
	p := recovery.New(recovery.Config{Policy: recovery.Rank, Ranks: 3, Agents: 2, RankAgent: []int{0, 1, 1}, MaxRestarts: 3,
		Nodes: []string{"n0", "n1"}, Up: []bool{true, true}})
	table := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	rl := RelaunchSpec(2, []int{1, 2}, recovery.Status{Epoch: 4, Version: 3, Suspends: true}, p.Ledger(), 7, table)
	if rl.Incarnation != 2 || rl.Epoch != 4 || rl.Version != 3 || !rl.Suspended || rl.CollEpoch != 7 ||
		len(rl.Table) != 3 || !slices.Equal(rl.Incs, []uint64{1, 1}) {
		t.Fatalf("%+v", rl)
	}
}
