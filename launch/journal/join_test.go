package journal

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// waitUntil polls cond every 5 ms until it holds, or fails the test after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // polling raft's state
	}
}

// testGroup is the front-end's journal and replica agents as the launcher
// makes them (the journal's replica alone, the agents' waiting to be
// added), over raft's in-memory transport, with a group's timers.
type testGroup struct {
	j      *Journal
	trans  []*raft.InmemTransport // 0: the journal's
	agents []*raftstore.Replica   // agents[i] on trans[i+1]
	names  []string               // the agents' names
}

func newTestGroup(t *testing.T, cfg Config, agents ...string) *testGroup {
	t.Helper()
	g := &testGroup{names: agents}
	for _, n := range append([]string{cfg.Node}, agents...) {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(n))
		g.trans = append(g.trans, tr)
	}
	for i, a := range g.trans {
		for k, b := range g.trans {
			if i != k {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	cfg.Transport, cfg.Timing = g.trans[0], raftstore.DefaultTiming(3)
	for i, n := range agents {
		r, err := raftstore.Open(raftstore.Config{StateDir: cfg.StateDir, Name: n, Transport: g.trans[i+1], Timing: raftstore.DefaultTiming(3)})
		if err != nil {
			t.Fatal(err)
		}
		g.agents = append(g.agents, r)
	}
	g.j = openCfg(t, cfg)
	t.Cleanup(func() {
		_ = g.j.Close(context.Background(), 0, "")
		for _, r := range g.agents {
			_ = r.Shutdown()
		}
		for _, tr := range g.trans {
			_ = tr.Close()
		}
	})
	return g
}

// crash stops agent i as a crashed host would: no more answers.
func (g *testGroup) crash(i int) {
	tr := g.trans[i+1]
	tr.DisconnectAll()
	for k, o := range g.trans {
		if k != i+1 {
			o.Disconnect(tr.LocalAddr())
		}
	}
	_ = g.agents[i].Shutdown()
}

// Seed 6488572703439982982 of docs/chaos.md: with --replicas 3, the
// group of the front-end and one replica agent loses that agent's host
// before the second joined. A recovery phase committed then must fail as
// soon as the front-end's replica has known no leader for NoLeader (it
// waited ElectTimeout, 10 s, for every command of the flush: 26 s), one
// committed once that is so must fail at once, and Close must not wait
// for the group either.
func TestJournalNoMajority(t *testing.T) {
	g := newTestGroup(t, Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}}, "node1")
	ctx := context.Background()
	if err := g.j.Join(ctx, "node1", "node1", ""); err != nil {
		t.Fatal(err)
	}
	launch(g.j, []string{"node0", "node1"}, 4, 5)
	if err := g.j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	g.crash(0)
	began := time.Now()
	done := make(chan error, 1)
	g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
	err := <-done
	took := time.Since(began)
	if !errors.Is(err, ErrNoMajority) {
		t.Fatalf("commit without a majority: %v, want ErrNoMajority", err)
	}
	// The lead is lost within raft's lease (275 ms) and an election
	// timeout or two.
	if limit := DefaultNoLeader + 2*time.Second; took > limit {
		t.Errorf("the commit failed %v after the crash, want within %v", took, limit)
	}
	t.Logf("commit failed %v after the crash: %v", took, err)

	// Long leaderless: a later commit fails at once.
	began = time.Now()
	g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "respawn", Rank: 5, Record: raftstore.Recovery{Stage: "respawn"}}, done)
	if err := <-done; !errors.Is(err, ErrNoMajority) || time.Since(began) > time.Second {
		t.Errorf("second commit: %v after %v, want ErrNoMajority at once", err, time.Since(began))
	}
	began = time.Now()
	err = g.j.Close(ctx, 1, "recovery failed")
	if !errors.Is(err, ErrNoMajority) {
		t.Errorf("close: %v, want the journal's ErrNoMajority", err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("close took %v, want it not to wait for the group", took)
	}
	in, err := raftstore.OpenReadOnly(g.j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Status.Done {
		t.Errorf("final status %+v committed without a majority", in.State.Status)
	}
}

// A leadership blip is not a lost majority: the front-end's replica cut
// off from the replica agents for less than NoLeader steps down, and a
// commit made meanwhile is not failed for a lost majority: it is
// committed once the front-end's replica leads again, or (if an agent's
// replica took the lead and kept it) fails after Regain (ElectTimeout's,
// unwatched: TestJournalRegain) as before.
func TestJournalLeaderBlip(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}, ElectTimeout: 3 * time.Second}
	g := newTestGroup(t, cfg, "node1", "node0")
	g.launchAll(t)
	g.cut()
	r := g.j.Replica()
	waitUntil(t, 5*time.Second, "the front-end's replica to step down", func() bool { return !r.IsLeader() })
	done := make(chan error, 1)
	g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
	g.heal()
	err := <-done
	if errors.Is(err, ErrNoMajority) {
		t.Fatalf("a blip taken for a lost majority: %v", err)
	}
	t.Logf("commit across the blip: %v (the front-end's replica leads: %v)", err, r.IsLeader())
}

// Seed 11107169930301695859 of docs/chaos.md: the job ends while replica
// agents join. A replica is either in the configuration the final
// status was committed in, and has that status, or it was refused
// (ErrClosed) and is outside it with an empty log (inspect names it as
// never joined). The end came while node0's join was under way, queued
// behind node1's: it was not waited for, and node0 stayed a nonvoter with
// an empty log.
func TestJournalJoinRacesClose(t *testing.T) {
	for _, at := range []string{"joining", "ready", "open"} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			hold := make(chan struct{})
			g := newTestGroup(t, Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}, Hold: hold}, "node1", "node0")
			ctx := context.Background()
			launch(g.j, []string{"node0", "node1"}, 4, -1)
			// As the front-end: a goroutine a replica agent, each joining
			// once the journal's replica leads, for a while.
			jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			joined := make([]chan error, len(g.names))
			for i, n := range g.names {
				joined[i] = make(chan error, 1)
				go func() { joined[i] <- g.j.Join(jctx, n, n, "") }()
			}
			close(hold)
			switch at {
			case "joining":
				waitUntil(t, 10*time.Second, "a join under way", func() bool { return g.j.joinsUnderWay() > 0 })
			case "ready":
				if err := g.j.Ready(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := g.j.Close(ctx, 0, "success"); err != nil {
				t.Fatal(err)
			}
			in, err := raftstore.OpenReadOnly(g.j.ReplicaDir())
			if err != nil {
				t.Fatal(err)
			}
			if !in.State.Status.Done {
				t.Fatalf("no final status: %+v", in.State.Status)
			}
			members := in.Configuration.Servers
			for i, n := range g.names {
				jerr := <-joined[i]
				member := slices.ContainsFunc(members, func(s raft.Server) bool { return string(s.ID) == n })
				if member != (jerr == nil) {
					t.Errorf("%s: join %v, in the configuration %v (%+v)", n, jerr, member, members)
				}
				if jerr != nil && !errors.Is(jerr, ErrClosed) {
					t.Errorf("%s: join %v, want ErrClosed", n, jerr)
				}
				_ = g.agents[i].Shutdown()
				a, err := raftstore.OpenReadOnly(g.agents[i].Dir())
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case member && !a.State.Status.Done:
					t.Errorf("%s: a member without the final status (log %d..%d)", n, a.FirstIndex, a.LastIndex)
				case !member && a.LastIndex != 0:
					t.Errorf("%s: outside the configuration, with a log %d..%d", n, a.FirstIndex, a.LastIndex)
				}
				t.Logf("%s: member %v, log %d..%d, join: %v", n, member, a.FirstIndex, a.LastIndex, jerr)
			}
		})
	}
}

// The front-end adds two replica agents to its group and dies at once,
// while the first one has not heard of the second yet (cut off from the
// front-end while the second joins). The two left must elect a leader: a
// second replica committed as a voter without the first would leave the
// first in a group of two voters, the dead front-end and itself, refusing
// the second's votes (found by TestRootFailoverDuringLaunch, 1 run in 10).
func TestJoinGroupSurvivesFrontend(t *testing.T) {
	dir := t.TempDir()
	names := []string{"vm", "node1", "node0"}
	trans := make([]*raft.InmemTransport, len(names))
	for i, n := range names {
		_, trans[i] = raft.NewInmemTransport(raft.ServerAddress(n))
	}
	connect := func(i, j int) {
		trans[i].Connect(trans[j].LocalAddr(), trans[j])
		trans[j].Connect(trans[i].LocalAddr(), trans[i])
	}
	connect(0, 1)
	connect(0, 2)
	connect(1, 2)
	// Timers long enough that the front-end keeps its lease while the
	// first replica agent is cut off from it.
	timing := raftstore.Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second, CommitTimeout: 10 * time.Millisecond}
	rs := make([]*raftstore.Replica, len(names))
	for i, n := range names {
		cfg := raftstore.Config{StateDir: dir, Name: n, Transport: trans[i], Timing: timing}
		if i == 0 {
			cfg.Peers = []raft.Server{{Suffrage: raft.Voter, ID: "vm", Address: trans[0].LocalAddr()}}
		}
		r, err := raftstore.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = r
	}
	t.Cleanup(func() {
		for i, r := range rs {
			_ = r.Shutdown()
			_ = trans[i].Close()
		}
	})
	fe := rs[0].Raft()
	waitUntil(t, 10*time.Second, "vm to lead", rs[0].IsLeader)
	if err := joinGroup(fe, "node1", trans[1].LocalAddr(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// node1 has the configuration it is a voter in (its commit did not
	// wait for it: the front-end was the only voter).
	waitUntil(t, 10*time.Second, "node1 to get the configuration that has it", func() bool {
		f := rs[1].Raft().GetConfiguration()
		return f.Error() == nil && slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == "node1" && s.Suffrage == raft.Voter })
	})
	// node1 hears nothing from the front-end for a while, node0 joins.
	trans[0].Disconnect(trans[1].LocalAddr())
	trans[1].Disconnect(trans[0].LocalAddr())
	heal := time.AfterFunc(300*time.Millisecond, func() { connect(0, 1) })
	defer heal.Stop()
	if err := joinGroup(fe, "node0", trans[2].LocalAddr(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The front-end dies as soon as node0 joined.
	trans[0].DisconnectAll()
	trans[1].Disconnect(trans[0].LocalAddr())
	trans[2].Disconnect(trans[0].LocalAddr())
	heal.Stop()
	_ = rs[0].Shutdown()
	deadline := time.Now().Add(10 * time.Second)
	for !rs[1].IsLeader() && !rs[2].IsLeader() {
		if time.Now().After(deadline) {
			for i := 1; i < 3; i++ {
				f := rs[i].Raft().GetConfiguration()
				t.Logf("%s: %v, configuration %+v", names[i], rs[i].Raft().State(), f.Configuration().Servers)
			}
			t.Fatal("no leader among the replica agents 10 s after the front-end died")
		}
		time.Sleep(10 * time.Millisecond) // polling raft's state
	}
}

// TestJournalKeepsFollowersFed: with KeepForFollowers, Close returns once
// the final status is committed and the front-end's replica stays up
// until Release, so that a follower that was cut off when the status was
// committed gets it from the front-end even once the other follower is
// gone (its agent exited first: chaos's replica-digests failures, issue
// #27). Release then shuts the replica down.
func TestJournalKeepsFollowersFed(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}, KeepForFollowers: 20 * time.Second}
	g := newTestGroup(t, cfg, "node1", "node0")
	g.launchAll(t)
	fe, node0 := g.trans[0], g.trans[2]
	fe.Disconnect(node0.LocalAddr())
	node0.Disconnect(fe.LocalAddr())
	g.trans[1].Disconnect(node0.LocalAddr())
	node0.Disconnect(g.trans[1].LocalAddr())
	if err := g.j.Close(context.Background(), 0, "success"); err != nil {
		t.Fatal(err)
	}
	r := g.j.Replica()
	if r.Raft().State() == raft.Shutdown {
		t.Fatal("the front-end's replica shut down at Close")
	}
	_ = g.agents[0].Shutdown() // node1's agent exited
	fe.Connect(node0.LocalAddr(), node0)
	node0.Connect(fe.LocalAddr(), fe)
	waitUntil(t, 10*time.Second, "node0's replica to hold the final status", func() bool {
		done := false
		g.agents[1].FSM().View(func(s *raftstore.State) { done = s.Status.Done })
		return done
	})
	g.j.Release()
	if s := r.Raft().State(); s != raft.Shutdown {
		t.Errorf("after Release the front-end's replica is %v, want shut down", s)
	}
}

// TestNoMajorityWaitsForLiveVoters: without a leader for NoLeader the
// majority is taken for lost, unless the caller said a majority of the
// voters live (MajorityAlive): then only after aliveNoLeader times as
// long.
func TestNoMajorityWaitsForLiveVoters(t *testing.T) {
	j := &Journal{cfg: Config{Node: "fe", NoLeader: 2 * time.Second}}
	for _, c := range []struct {
		alive      bool
		leaderless time.Duration
		lost       bool
	}{
		{false, time.Second, false},
		{false, 2 * time.Second, true},
		{true, 2 * time.Second, false},
		{true, 19 * time.Second, false},
		{true, 20 * time.Second, true},
	} {
		j.MajorityAlive(c.alive)
		if err := j.noMajority(c.leaderless); (err != nil) != c.lost || c.lost && !errors.Is(err, ErrNoMajority) {
			t.Errorf("alive %v, leaderless %v: %v, want lost %v", c.alive, c.leaderless, err, c.lost)
		}
	}
}

// TestJournalMembers: once the agents' replicas joined, the group's
// members are the front-end's voter and theirs.
func TestJournalMembers(t *testing.T) {
	cfg := Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}}
	g := newTestGroup(t, cfg, "node1", "node0")
	g.launchAll(t)
	voters, servers, ok := g.j.Members()
	slices.Sort(voters)
	if !ok || servers != 3 || !slices.Equal(voters, []string{"fe", "node0", "node1"}) {
		t.Fatalf("Members() = %v, %d, %v", voters, servers, ok)
	}
}
