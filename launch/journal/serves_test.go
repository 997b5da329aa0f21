package journal

import (
	"context"
	"testing"
)

// TestServes: a group serves the replicas that joined it (the front-end's
// first); a solo log, without a raft server, serves none.
func TestServes(t *testing.T) {
	g := newTestGroup(t, Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 2, Replicas: 3}}, "node1")
	ctx := context.Background()
	if err := g.j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !g.j.Serves(1) || g.j.Serves(2) {
		t.Fatalf("the front-end's replica alone: Serves(1) %v, Serves(2) %v; want true, false", g.j.Serves(1), g.j.Serves(2))
	}
	if err := g.j.Join(ctx, "node1", "node1", ""); err != nil {
		t.Fatal(err)
	}
	if !g.j.Serves(2) || g.j.Serves(3) {
		t.Fatalf("node1 joined: Serves(2) %v, Serves(3) %v; want true, false", g.j.Serves(2), g.j.Serves(3))
	}
	solo := openCfg(t, Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-solo", N: 1}})
	defer solo.Close(ctx, 0, "")
	if err := solo.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if solo.Serves(1) {
		t.Fatalf("a solo log serves a replica")
	}
}
