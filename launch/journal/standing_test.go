package journal

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// cut separates the journal's replica from the replica agents' (a stalled
// front-end, or a cut of the raft traffic only); heal joins them again.
func (g *testGroup) cut() {
	fe := g.trans[0]
	fe.DisconnectAll()
	for _, o := range g.trans[1:] {
		o.Disconnect(fe.LocalAddr())
	}
}

func (g *testGroup) heal() {
	fe := g.trans[0]
	for _, o := range g.trans[1:] {
		fe.Connect(o.LocalAddr(), o)
		o.Connect(fe.LocalAddr(), fe)
	}
}

// launchAll adds every replica agent to the group and records a launch of
// 8 ranks on node0 and node1, committed.
func (g *testGroup) launchAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, n := range g.names {
		if err := g.j.Join(ctx, n, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	launch(g.j, []string{"node0", "node1"}, 4, -1)
	if err := g.j.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// agentLeader waits until one of the replica agents leads and returns it.
func (g *testGroup) agentLeader(t *testing.T) *raftstore.Replica {
	t.Helper()
	var l *raftstore.Replica
	waitUntil(t, 10*time.Second, "a replica agent to lead", func() bool {
		for _, r := range g.agents {
			if r.IsLeader() {
				l = r
				return true
			}
		}
		return false
	})
	return l
}

// handBack heals a deposed group's cut and has its leader, a replica
// agent, hand the lead back to the front-end's replica once it follows.
func (g *testGroup) handBack(t *testing.T, leader *raftstore.Replica) {
	t.Helper()
	g.heal()
	waitUntil(t, 10*time.Second, "the front-end's replica to follow the agents' leader", func() bool {
		id, _ := g.j.Replica().Leader()
		return id != "" && id != "fe"
	})
	if err := leader.Raft().LeadershipTransferToServer("fe", g.trans[0].LocalAddr()).Error(); err != nil {
		t.Fatalf("hand the lead back: %v", err)
	}
}

// deposedGroup is a group of the front-end's journal and two replica
// agents, with a launch recorded, whose front-end was then cut off until
// an agent led; a recovery phase was committed meanwhile (done answers).
func deposedGroup(t *testing.T) (g *testGroup, leader *raftstore.Replica, done chan error) {
	t.Helper()
	g = newTestGroup(t, Config{StateDir: t.TempDir(), Node: "fe", Job: Job{ID: "ft-test", N: 8, Replicas: 3}}, "node1", "node0")
	ctx := context.Background()
	g.launchAll(t)
	if st := g.j.Standing(ctx); !st.Leads {
		t.Fatalf("the front-end's writer does not lead before the cut: %+v", st)
	}
	g.cut()
	leader = g.agentLeader(t)
	// Deposed past its lease: Standing asks a quorum, which it cannot
	// reach, and the replica steps down within the lease.
	vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	waitUntil(t, 5*time.Second, "the front-end's writer to learn it does not lead", func() bool { return !g.j.Standing(vctx).Leads })
	done = make(chan error, 1)
	g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
	return g, leader, done
}

// TestJournalDeposedHandedBack is issue 27's stall of 2 s at the state
// log's level: the front-end's replica, cut off from the two replica
// agents' past its lease, loses the lead to one of them; once it is back,
// that agent hands the lead back (launch/agent's leadershipToRoot), and
// the recovery phase committed meanwhile is committed then: no lost
// majority, no fence.
func TestJournalDeposedHandedBack(t *testing.T) {
	g, leader, done := deposedGroup(t)
	g.handBack(t, leader)
	if err := <-done; err != nil {
		t.Fatalf("the phase committed across the stall: %v", err)
	}
	ctx := context.Background()
	if st := g.j.Standing(ctx); !st.Leads || st.TakenOver != nil {
		t.Fatalf("after the hand-back: %+v", st)
	}
	if err := g.j.Close(ctx, 0, "success"); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(g.j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if !in.State.Status.Done || in.State.Epoch != 1 || in.State.Recovery == nil || in.State.Leader != "" {
		t.Errorf("state: status %+v, epoch %d, recovery %+v, root taken over by %q", in.State.Status, in.State.Epoch, in.State.Recovery, in.State.Leader)
	}
}

// TestJournalDeposedTakenOver: the replica agent that leads takes the root
// over (as when the front-end stalled past the agents' link timeout)
// before the front-end's replica is back. Back, that replica learns of the
// takeover from the log (term, leader): Standing says it is fenced, the
// phase it committed meanwhile fails with ErrFenced (not a lost majority:
// two of three replicas lead), later writes at once, and Abandon stops the
// journal without a final status, which is the successor's to commit.
func TestJournalDeposedTakenOver(t *testing.T) {
	g, leader, done := deposedGroup(t)
	ctx := context.Background()
	fence, err := leader.Takeover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for i, r := range g.agents {
		if r == leader {
			name = g.names[i]
		}
	}
	g.heal()
	var st Standing
	waitUntil(t, 10*time.Second, "the front-end's replica to learn of the takeover", func() bool {
		st = g.j.Standing(ctx)
		return st.TakenOver != nil
	})
	if st.Leads || st.TakenOver.Leader != name || st.TakenOver.Term != fence.Term || !errors.Is(st.Err, ErrFenced) {
		t.Fatalf("standing %+v (%v), want fenced by %s in term %d", st, st.TakenOver, name, fence.Term)
	}
	err = <-done
	if !errors.Is(err, ErrFenced) || errors.Is(err, ErrNoMajority) {
		t.Fatalf("the phase committed while deposed: %v, want ErrFenced", err)
	}
	began := time.Now()
	g.j.Commit(RecoveryPhase{Epoch: 1, Stage: "respawn", Rank: 5, Record: raftstore.Recovery{Stage: "respawn"}}, done)
	if err := <-done; !errors.Is(err, ErrFenced) || time.Since(began) > time.Second {
		t.Errorf("a later commit: %v after %v, want ErrFenced at once", err, time.Since(began))
	}
	if err := g.j.Abandon(ctx); err != nil {
		t.Fatal(err)
	}
	// The successor goes on with the group's majority: it commits, and
	// no final status is the front-end's.
	if _, err := leader.Apply(ctx, &raftstore.AppendEvents{Events: []raftstore.Event{{Kind: raftstore.EventLaunch, Rank: raftstore.NoRank, Detail: "after the takeover"}}}); err != nil {
		t.Fatalf("the successor's write: %v", err)
	}
	var s raftstore.State
	leader.FSM().View(func(st *raftstore.State) { s = *st })
	if s.Status.Done || s.Leader != name || s.Epoch != fence.Epoch {
		t.Errorf("successor's state: status %+v, root %q, epoch %d (fence %+v)", s.Status, s.Leader, s.Epoch, fence)
	}
}

// TestJoinAdvertisesReachableAddr: a front-end's replica that advertises
// an address its replica agents cannot reach (the first of its host's
// addresses, on a network the agents are not on, as on an emulated
// cluster's host) is given, when an agent joins, the address of its host
// that routes to that agent: the agent's replica, leading after a stall,
// can reach it and hand the lead back.
func TestJoinAdvertisesReachableAddr(t *testing.T) {
	creds := rootCreds(t)
	ctx := context.Background()
	stream := func(host string) *raft.NetworkTransport {
		l, err := NewRaftStream(ctx, creds, host)
		if err != nil {
			t.Fatal(err)
		}
		tr := raftstore.NewTCPTransport(l)
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	feTr := stream("192.0.2.77") // TEST-NET-1: nobody's
	agTr := stream("127.0.0.1")
	dir := t.TempDir()
	j := openCfg(t, Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", N: 2, Replicas: 3}, Transport: feTr, Timing: raftstore.DefaultTiming(3)})
	t.Cleanup(func() { _ = j.Close(ctx, 0, "") })
	ag, err := raftstore.Open(raftstore.Config{StateDir: dir, Name: "node0", Transport: agTr, Timing: raftstore.DefaultTiming(3)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ag.Shutdown() })
	if err := j.Join(ctx, "node0", string(agTr.LocalAddr()), ""); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(string(feTr.LocalAddr()))
	want := raft.ServerAddress(net.JoinHostPort("127.0.0.1", port))
	var got raft.ServerAddress
	for _, s := range j.Replica().Raft().GetConfiguration().Configuration().Servers {
		if s.ID == "fe" {
			got = s.Address
		}
	}
	if got != want {
		t.Fatalf("the front-end's replica is in the group as %q, want %q (the address that reaches node0)", got, want)
	}
	// The agent's replica leads, then hands the lead back: it reaches
	// the front-end's.
	fe := j.Replica()
	waitUntil(t, 10*time.Second, "node0 to catch up", func() bool {
		return ag.Raft().AppliedIndex() >= fe.Raft().LastIndex() && fe.IsLeader()
	})
	transfer := func(from *raftstore.Replica, id raft.ServerID, addr raft.ServerAddress) {
		t.Helper()
		waitUntil(t, 10*time.Second, "the lead to move to "+string(id), func() bool {
			if from.IsLeader() {
				_ = from.Raft().LeadershipTransferToServer(id, addr).Error()
			}
			l, _ := from.Leader()
			return l == id
		})
	}
	transfer(fe, "node0", agTr.LocalAddr())
	transfer(ag, "fe", want)
	if err := j.Sync(ctx); err != nil {
		t.Fatalf("the journal writes once it leads again: %v", err)
	}
}

// TestFirstOfGroup: a front-end's log configured as the first voter of a
// group: its own transport and the group's timing, and a replica ID other
// than the agents' when its host has an agent's name.
func TestFirstOfGroup(t *testing.T) {
	creds := rootCreds(t)
	for _, c := range []struct{ node, want string }{{"fe", "fe"}, {"n1", "n1-root"}} {
		cfg := Config{Node: c.node}
		tr, err := cfg.FirstOfGroup(context.Background(), 3, creds, "127.0.0.1", []string{"n0", "n1"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Node != c.want || cfg.Transport != tr || cfg.Timing != raftstore.DefaultTiming(3) {
			t.Errorf("host %s: node %q (want %q), transport set %v, timing %+v", c.node, cfg.Node, c.want, cfg.Transport == tr, cfg.Timing)
		}
		tr.Close()
	}
}

// rootCreds are a front-end's credentials from a job CA of its own.
func rootCreds(t *testing.T) *secure.Credentials {
	t.Helper()
	ca, err := secure.NewJobCA("ft-test")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := ca.Issue("root")
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// TestRaftCutFromEnv: no cut without RaftCutEnv; with it, a cut while the
// file it names exists.
func TestRaftCutFromEnv(t *testing.T) {
	t.Setenv(RaftCutEnv, "")
	if RaftCutFromEnv() != nil {
		t.Fatal("a cut without the variable")
	}
	path := filepath.Join(t.TempDir(), "cut")
	t.Setenv(RaftCutEnv, path)
	cut := RaftCutFromEnv()
	if cut == nil || cut() {
		t.Fatal("cut before the file exists")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !cut() {
		t.Fatal("no cut while the file exists")
	}
}
