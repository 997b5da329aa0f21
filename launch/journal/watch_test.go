package journal

import (
	"context"
	"slices"
	"testing"
	"time"
)

// watchOf is a front-end's watch on g's journal whose replica agents are
// all alive.
func watchOf(g *testGroup, after time.Duration) *Watch {
	say := func(string, ...any) {}
	alive := map[string]bool{}
	for _, n := range g.names {
		alive[n] = true
	}
	return NewWatch(g.j, WatchConfig{Node: "fe", StepAsideAfter: after, Alive: func() map[string]bool { return alive },
		Warnf: say, Verbosef: say})
}

// TestWatchCutOffStepsAside: a front-end cut off from its replica agents,
// which lead without it, holds (keeps) what it would act on, replays
// none of it while they lead, and steps aside once deposed longer than
// its bound, abandoning its state log (no leader known: it was cut off)
// and the events it kept.
func TestWatchCutOffStepsAside(t *testing.T) {
	g, _, _ := deposedGroup(t)
	w := watchOf(g, 0)
	ctx := context.Background()
	if !w.Keep(ctx, "a link's end") || !w.Deposed() || w.Aside() != nil {
		t.Fatalf("deposed with its other voters up: hold, deposed %v, aside %+v; want held, not aside", w.Deposed(), w.Aside())
	}
	waitUntil(t, 5*time.Second, "the watch to step aside", func() bool {
		if ev := w.Replay(ctx); ev != nil {
			t.Fatalf("the held events %v replayed while the agents lead", ev)
		}
		return w.Aside() != nil
	})
	if a := w.Aside(); a.Leader != "" || a.Term != 0 || a.JobDir != g.j.Dir() {
		t.Errorf("stepped aside %+v: want no leader known, the job's directory", a)
	}
	if !w.Keep(ctx, "an exit") || len(w.held) != 0 {
		t.Errorf("an event after stepping aside was not dropped (kept %v)", w.held)
	}
}

// TestWatchTakenOver: a replica agent took the root over while the
// front-end was cut off: back, the watch steps aside naming it.
func TestWatchTakenOver(t *testing.T) {
	g, leader, _ := deposedGroup(t)
	w := watchOf(g, time.Hour)
	ctx := context.Background()
	if !w.Hold(ctx) {
		t.Fatal("not held while deposed")
	}
	fence, err := leader.Takeover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.heal()
	waitUntil(t, 10*time.Second, "the watch to learn of the takeover", func() bool {
		w.Look(ctx)
		return w.Aside() != nil
	})
	if a := w.Aside(); a.Term != fence.Term || a.Leader == "" || a.Leader == "fe" {
		t.Errorf("stepped aside %+v, want the successor of term %d named", a, fence.Term)
	}
}

// TestGroupTellsLeadChanges: the group tells its watch's Leads once when
// a look finds the front-end deposed and once when it leads again, not at
// every event held in between.
func TestGroupTellsLeadChanges(t *testing.T) {
	tg, leader, _ := deposedGroup(t)
	var told []bool
	w := watchOf(tg, time.Hour).cfg
	w.Leads = func(leads bool) { told = append(told, leads) }
	g := GroupOf(tg.j)
	g.Watch(w)
	ctx := context.Background()
	if !g.Hold(ctx, "a link's end", false) || !g.Hold(ctx, "an exit", false) {
		t.Fatal("not held while deposed")
	}
	if !slices.Equal(told, []bool{false}) {
		t.Fatalf("told %v while deposed, want [false]", told)
	}
	tg.handBack(t, leader)
	var replayed []any
	waitUntil(t, 10*time.Second, "the front-end to lead again", func() bool {
		replayed = append(replayed, g.Replay(ctx)...)
		return !g.Deposed()
	})
	if !slices.Equal(told, []bool{false, true}) || len(replayed) != 2 || g.Aside() != nil {
		t.Errorf("told %v, replayed %v, aside %+v: want [false true], both events, not aside", told, replayed, g.Aside())
	}
}

// TestLostVoter: the voter that is none of the agents' is the front-end's,
// in a group of three servers.
func TestLostVoter(t *testing.T) {
	g := newTestGroup(t, Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-voter", N: 8, Replicas: 3}}, "node1", "node0")
	g.launchAll(t)
	grp := GroupOf(g.j)
	if v, n := grp.LostVoter([]string{"node0", "node1"}); v != "fe" || n != 3 {
		t.Errorf("LostVoter = %q of %d servers, want fe of 3", v, n)
	}
}
