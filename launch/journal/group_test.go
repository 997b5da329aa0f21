package journal

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
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

// TestGroupEndWith: the end of a root's log removes its live report and
// says where the log is only when Where says so, the commit's figures only
// with --verbose, and no error.
func TestGroupEndWith(t *testing.T) {
	for _, where := range []bool{false, true} {
		g, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-end", N: 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		g.Start()
		g.WriteLive("fe", func() Live { return Live{Job: "ft-end", Phase: "running"} })
		var warned [][]any
		verbose := 0
		g.EndWith(0, "success", Ending{JobID: "ft-end", Verbose: where,
			Warnf:    func(_ string, args ...any) { warned = append(warned, args) },
			Verbosef: func(string, ...any) { verbose++ },
			Where:    func() bool { return where }})()
		g.End()
		if _, err := ReadLive(g.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("where %v: the live report after the end: %v", where, err)
		}
		want := [][]any(nil)
		if where {
			want = [][]any{{"ft-end", g.Dir()}}
		}
		if !slices.EqualFunc(warned, want, slices.Equal) || verbose != len(want) {
			t.Errorf("where %v: warned %v, %d verbose line(s); want %v, %d", where, warned, verbose, want, len(want))
		}
	}
}

// TestFrontEndConfig: the front-end's log for each --replicas: one
// voter solo (kept in memory if need be), no credentials asked; a group
// of 3 or 5 needs that many nodes besides the front-end, and its first
// voter keeps its replica up for the followers; other sizes are refused.
func TestFrontEndConfig(t *testing.T) {
	creds := rootCreds(t)
	asked := 0
	give := func() (*secure.Credentials, error) { asked++; return creds, nil }
	for _, c := range []struct {
		name     string
		replicas int
		agents   []string
		remote   bool
		err      string
	}{
		{"one replica", 1, []string{"vm"}, false, ""},
		{"two replicas", 2, []string{"n0", "n1"}, true, "--replicas must be 1, 3 or 5, got 2"},
		{"three replicas, one node", 3, []string{"n0"}, true, "--replicas 3 needs 2 nodes besides the front-end (hosts or --test-nodes), the job has 1"},
		{"three replicas, this machine's agent only", 3, []string{"vm"}, false, "--replicas 3 needs 2 nodes besides the front-end (hosts or --test-nodes), the job has 1"},
		{"three replicas", 3, []string{"n0", "n1"}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			asked = 0
			cfg, tr, err := FrontEndConfig(context.Background(), t.TempDir(), "fe", Job{ID: "ft-x", N: 2, Replicas: c.replicas}, c.agents, c.remote, give, "127.0.0.1", time.Second)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.replicas == 1 {
				if !cfg.Solo || !cfg.Fallback || tr != nil || asked != 0 || cfg.Job.Replicas != 1 {
					t.Fatalf("one replica: %+v, transport %v, credentials asked %d times", cfg, tr, asked)
				}
				return
			}
			defer tr.Close()
			if cfg.Solo || cfg.Fallback || cfg.Transport != tr || cfg.KeepForFollowers != time.Second || asked != 1 {
				t.Fatalf("a group: solo %v, fallback %v, keep %v, credentials asked %d times", cfg.Solo, cfg.Fallback, cfg.KeepForFollowers, asked)
			}
		})
	}
}

// TestEndReadyWaitsForJoiningReplicas: the job's end is committed once
// every replica agent up joined or failed to, at once when the group has
// not formed, and without them (late) 10 s after the job ended.
func TestEndReadyWaitsForJoiningReplicas(t *testing.T) {
	solo, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-end", N: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer solo.End()
	solo.Expect("n1")
	if ready, late := solo.EndReady([]string{"n1"}, time.Now()); !ready || late {
		t.Errorf("no group formed: ready %v late %v, want ready", ready, late)
	}
	g := GroupOf(open(t, t.TempDir(), 1))
	defer g.End()
	if err := g.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.Expect("n1")
	for _, tc := range []struct {
		name        string
		up          []string
		ended       time.Duration // ago
		ready, late bool
	}{
		{"n1 joining", []string{"n1"}, 0, false, false},
		{"n1 joining 11 s after the end", []string{"n1"}, 11 * time.Second, true, true},
		{"n1 not up", nil, 0, true, false},
	} {
		if ready, late := g.EndReady(tc.up, time.Now().Add(-tc.ended)); ready != tc.ready || late != tc.late {
			t.Errorf("%s: ready %v late %v, want %v %v", tc.name, ready, late, tc.ready, tc.late)
		}
	}
	g.Settle("n1", false)
	if ready, _ := g.EndReady([]string{"n1"}, time.Now()); !ready {
		t.Error("n1 settled: not ready")
	}
}

// TestGroupWithoutWatch: a root without a watch on its lead (a successor,
// one replica; or no group at all) holds no event, replays none, is never
// deposed and never steps aside.
func TestGroupWithoutWatch(t *testing.T) {
	var none *Group
	g, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-nowatch", N: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.End()
	for _, x := range []*Group{none, g} {
		if x.Hold(context.Background(), 1, false) || x.Replay(context.Background()) != nil || x.Deposed() || x.StepAside() != nil {
			t.Errorf("group %v: held, replayed, deposed or stepped aside without a watch", x)
		}
	}
}
