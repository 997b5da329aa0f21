package journal

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestGroupHoldsAndClosesOnce: a root's group holds its replica's start
// until Start (records queue meanwhile), counts a replica agent joined
// once however often it is told, and commits the final status once: a
// second BeginClose waits for the first, and after GiveUp nothing is
// committed.
func TestGroupHoldsAndClosesOnce(t *testing.T) {
	g, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-group", N: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.RankExited(RankExit{Rank: 0})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if err := g.Sync(ctx); err == nil {
		t.Errorf("a held replica synced")
	}
	cancel()
	g.Start()
	g.Start()
	if err := g.Sync(context.Background()); err != nil {
		t.Fatalf("sync once started: %v", err)
	}
	g.Expect("n1")
	g.Settle("n1", true)
	g.Expect("n1") // its next agent hosts a replica again
	if g.Settled("n1") {
		t.Errorf("n1 settled after it was given a replica again")
	}
	g.Settle("n1", true)
	g.Settle("n2", false)
	if !g.Settled("n1") || !g.Settled("n2") || !slices.Equal(g.Joined(), []string{"n1"}) {
		t.Errorf("joined %v, want [n1] (n1, n2 settled)", g.Joined())
	}
	calls := 0
	wait := g.BeginClose(0, "success", func(time.Duration, error) { calls++ })
	again := g.BeginClose(1, "again", func(time.Duration, error) { calls++ })
	wait()
	again()
	wait()
	if calls != 1 || !g.Closing() {
		t.Errorf("the close's end said %d time(s), closing %v; want once", calls, g.Closing())
	}
	g.End()
	st := g.FSM().Copy()
	if !st.Status.Done || st.Status.Message != "success" {
		t.Errorf("final status %+v, want the first close's", st.Status)
	}

	h, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-aside", N: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.GiveUp()
	h.BeginClose(0, "success", func(time.Duration, error) { t.Errorf("a group given up committed its end") })()
	h.End()
}
