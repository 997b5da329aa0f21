package raftstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"
)

// watcher records a replica's leadership changes; it ends when the
// replica shuts down and closes the channel.
type watcher struct {
	mu      sync.Mutex
	changes []Leadership
	done    chan struct{}
}

func watch(r *Replica) *watcher {
	w := &watcher{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for l := range r.Leadership() {
			w.mu.Lock()
			w.changes = append(w.changes, l)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *watcher) all() []Leadership {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Leadership(nil), w.changes...)
}

func (w *watcher) isLeader() bool {
	c := w.all()
	return len(c) > 0 && c[len(c)-1].IsLeader
}

// waitFor polls cond every 5 ms until it holds or the deadline passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// group is n replicas over raft's in-memory transport, with real files.
type group struct {
	t        testing.TB
	dir      string
	replicas []*Replica
	watchers []*watcher
	trans    []*raft.InmemTransport
}

func newGroup(t testing.TB, n int, tune func(*Config)) *group {
	g := &group{t: t, dir: t.TempDir()}
	var peers []raft.Server
	var addrs []raft.ServerAddress
	for i := range n {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("inmem-%d", i)))
		addrs = append(addrs, addr)
		g.trans = append(g.trans, tr)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("r%d", i)), Address: addr})
	}
	for i := range n {
		for j := range n {
			if i != j {
				g.trans[i].Connect(addrs[j], g.trans[j])
			}
		}
	}
	for i := range n {
		cfg := Config{StateDir: g.dir, Name: fmt.Sprintf("r%d", i), Transport: g.trans[i], Peers: peers}
		if tune != nil {
			tune(&cfg)
		}
		r, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g.replicas = append(g.replicas, r)
		g.watchers = append(g.watchers, watch(r))
	}
	t.Cleanup(g.shutdown)
	return g
}

// isolate cuts replica i off from the others, both ways.
func (g *group) isolate(i int) {
	g.trans[i].DisconnectAll()
	for j, tr := range g.trans {
		if j != i {
			tr.Disconnect(g.trans[i].LocalAddr())
		}
	}
}

func (g *group) shutdown() {
	for i, r := range g.replicas {
		if err := r.Shutdown(); err != nil {
			g.t.Error(err)
		}
		<-g.watchers[i].done
	}
	for _, tr := range g.trans {
		tr.Close()
	}
}

// leader waits for exactly one live replica to report leadership, among
// those not in dead.
func (g *group) leader(d time.Duration, dead map[int]bool) int {
	g.t.Helper()
	idx := -1
	waitFor(g.t, d, "a leader", func() bool {
		idx = -1
		for i, w := range g.watchers {
			if !dead[i] && w.isLeader() && g.replicas[i].IsLeader() {
				if idx >= 0 {
					return false
				}
				idx = i
			}
		}
		return idx >= 0
	})
	return idx
}

func rankBatch(first, n int, inc uint64) *UpdateRanks {
	c := &UpdateRanks{}
	for r := first; r < first+n; r++ {
		node := fmt.Sprintf("node%04d", r/16)
		c.Ranks = append(c.Ranks, Rank{Rank: r, Node: node, PID: 4000 + r, ITuple: []byte(fmt.Sprintf("%s:%d", node, 20000+r%16)), Incarnation: inc, State: RankRunning})
	}
	c.Events = []Event{{Kind: EventLaunch, Node: fmt.Sprintf("node%04d", first/16), Rank: NoRank, Detail: fmt.Sprintf("ranks %d..%d reported", first, first+n-1)}}
	return c
}

func setJob(t testing.TB, r *Replica, size int) {
	t.Helper()
	ctx := context.Background()
	if _, err := r.Apply(ctx, &SetJob{Job: JobSpec{ID: "job-7", Size: size, Spec: []byte("./a.out")}}); err != nil {
		t.Fatal(err)
	}
	var agents []Agent
	for i := 0; i < size/16; i++ {
		agents = append(agents, Agent{Node: fmt.Sprintf("node%04d", i), Addr: fmt.Sprintf("10.1.%d.%d:7000", i/256, i%256), Incarnation: 1})
	}
	if _, err := r.Apply(ctx, &UpdateAgents{Agents: agents}); err != nil {
		t.Fatal(err)
	}
}

// TestGroupFailover: three replicas; the leader is shut down while a batch
// is in flight; a new leader takes over, commits go on, and the
// survivors' states agree, live and read back from their files.
func TestGroupFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const size, batch = 4096, 256
		g := newGroup(t, 3, func(c *Config) { c.SnapshotThreshold = 1 << 20 })
		ctx := context.Background()
		l1 := g.leader(10*time.Second, nil)
		r1 := g.replicas[l1]
		f1, err := r1.Takeover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f1.Epoch != 1 {
			t.Fatalf("first fence %+v", f1)
		}
		setJob(t, r1, size)
		for b := 0; b < 6; b++ {
			if _, err := r1.Apply(ctx, rankBatch(b*batch, batch, 1)); err != nil {
				t.Fatal(err)
			}
		}
		// The leader is cut off with batch 6 appended to its log but not
		// committed, then shut down.
		g.isolate(l1)
		appended := r1.Raft().LastIndex()
		inflight := make(chan error, 1)
		go func() {
			_, err := r1.Apply(ctx, rankBatch(6*batch, batch, 1))
			inflight <- err
		}()
		waitFor(t, time.Second, "batch 6 in the old leader's log", func() bool { return r1.Raft().LastIndex() > appended })
		if err := r1.Shutdown(); err != nil {
			t.Fatal(err)
		}
		err = <-inflight
		t.Logf("batch in flight at the leader's shutdown: %v", err)
		if !errors.Is(err, ErrIndeterminate) || !errors.Is(err, raft.ErrLeadershipLost) {
			t.Fatalf("in-flight apply: %v", err)
		}
		if err := r1.VerifyLeader(ctx); !errors.Is(err, ErrShutdown) && !errors.Is(err, ErrNotLeader) {
			t.Errorf("VerifyLeader on a shut-down replica: %v", err)
		}
		if _, err := r1.Apply(ctx, &AppendEvents{}); err == nil {
			t.Error("apply on a shut-down replica succeeded")
		}

		// The old leader's stream reports the gain and the loss, in order,
		// numbered without gaps.
		<-g.watchers[l1].done
		ch := g.watchers[l1].all()
		for i, c := range ch {
			if c.Seq != uint64(i+1) {
				t.Fatalf("old leader's changes %+v: gap at %d", ch, i)
			}
		}
		if len(ch) < 2 || !ch[0].IsLeader || ch[len(ch)-1].IsLeader {
			t.Fatalf("old leader's changes %+v", ch)
		}
		start := time.Now()
		l2 := g.leader(10*time.Second, map[int]bool{l1: true})
		t.Logf("new leader r%d after %v (fake time)", l2, time.Since(start))
		r2 := g.replicas[l2]
		f2, err := r2.Takeover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f2.Term <= f1.Term || f2.Epoch != 2 {
			t.Fatalf("fence went from %+v to %+v", f1, f2)
		}
		// The follower hears of the new leader.
		for i, w := range g.watchers {
			if i == l1 || i == l2 {
				continue
			}
			waitFor(t, 5*time.Second, "the follower to learn the new leader", func() bool {
				c := w.all()
				return len(c) > 0 && c[len(c)-1].Leader == raft.ServerID(fmt.Sprintf("r%d", l2))
			})
			if id, _ := g.replicas[i].Leader(); id != raft.ServerID(fmt.Sprintf("r%d", l2)) {
				t.Errorf("follower says the leader is %q", id)
			}
			if _, err := g.replicas[i].Apply(ctx, &AppendEvents{}); !errors.Is(err, ErrNotLeader) {
				t.Errorf("apply on a follower: %v", err)
			}
		}
		if _, err := r2.Apply(ctx, &AppendEvents{Events: []Event{{Kind: EventRecovery, Rank: NoRank, Detail: fmt.Sprintf("root moved from r%d to r%d", l1, l2)}}}); err != nil {
			t.Fatal(err)
		}
		// Batch 6 again: harmless if it did commit.
		for b := 6; b < size/batch; b++ {
			if _, err := r2.Apply(ctx, rankBatch(b*batch, batch, 1)); err != nil {
				t.Fatal(err)
			}
			if b == 10 {
				if err := r2.Snapshot(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := r2.VerifyLeader(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := r2.Apply(ctx, &Finish{Status: Status{ExitCode: 0, Message: "all ranks exited"}}); err != nil {
			t.Fatal(err)
		}
		// raft's own applied index runs ahead of the FSM: wait on the FSM's.
		want := r2.FSM().AppliedIndex()
		var digests = map[int][32]byte{}
		for i, r := range g.replicas {
			if i == l1 {
				continue
			}
			waitFor(t, 5*time.Second, "followers to apply everything", func() bool { return r.FSM().AppliedIndex() >= want })
			digests[i] = r.FSM().Digest()
		}
		s := r2.FSM().Copy()
		for i := range digests {
			if digests[i] != r2.FSM().Digest() {
				t.Errorf("r%d's digest differs from the leader's", i)
			}
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		for _, rk := range s.Ranks {
			if rk.State != RankRunning || rk.Incarnation != 1 {
				t.Fatalf("rank %+v", rk)
			}
		}
		if s.Leader != fmt.Sprintf("r%d", l2) || s.Epoch != 2 || !s.Status.Done {
			t.Errorf("leader %q epoch %d status %+v", s.Leader, s.Epoch, s.Status)
		}
		g.shutdown()

		// Read back every replica's files.
		for i := range g.replicas {
			in, err := OpenReadOnly(filepath.Join(g.dir, fmt.Sprintf("r%d", i)))
			if err != nil {
				t.Fatalf("r%d: %v", i, err)
			}
			if in.Meta.Node != fmt.Sprintf("r%d", i) || len(in.Configuration.Servers) != 3 || in.CurrentTerm < f1.Term {
				t.Errorf("r%d: meta %+v, %d servers, term %d", i, in.Meta, len(in.Configuration.Servers), in.CurrentTerm)
			}
			if i == l1 {
				// The old leader saw only its own term; its log ends with
				// batch 6, which never committed in that term.
				if in.State.Leader != fmt.Sprintf("r%d", l1) || in.State.Epoch != 1 {
					t.Errorf("old leader's file: leader %q epoch %d", in.State.Leader, in.State.Epoch)
				}
				if n := in.State.Ranks[7*batch-1].State; n != RankRunning {
					t.Errorf("old leader's file: last rank of batch 6 is %v", n)
				}
				if n := in.State.Ranks[7*batch].State; n != RankUnknown {
					t.Errorf("old leader's file: first rank of batch 7 is %v", n)
				}
				continue
			}
			if in.State.Digest() != digests[i] {
				t.Errorf("r%d: state read back differs from the live state", i)
			}
			if i == l2 && in.Snapshot == nil {
				t.Errorf("r%d: no snapshot used", i)
			}
			terms := in.Terms()
			if len(terms) < 2 || terms[len(terms)-1].Term != f2.Term {
				t.Errorf("r%d: terms in the log %v, want the new leader's %d last", i, terms, f2.Term)
			}
			var leaders []string
			for _, e := range in.State.Events {
				if e.Kind == EventLeader {
					leaders = append(leaders, fmt.Sprintf("%s@%d", e.Node, e.Term))
				}
			}
			if want := fmt.Sprintf("[r%d@%d r%d@%d]", l1, f1.Term, l2, f2.Term); fmt.Sprint(leaders) != want {
				t.Errorf("r%d: leader events %v, want %s", i, leaders, want)
			}
			for _, e := range in.Entries {
				if e.Err != nil {
					t.Errorf("r%d: entry %d: %v", i, e.Index, e.Err)
				}
			}
		}
	})
}

func TestSingleVoterAndLock(t *testing.T) {
	dir := t.TempDir()
	addr, tr := raft.NewInmemTransport("")
	defer tr.Close()
	start := time.Now()
	r, err := Open(Config{StateDir: dir, Name: "front", Transport: tr, Peers: []raft.Server{{Suffrage: raft.Voter, ID: "front", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	l := <-r.Leadership()
	elected := time.Since(start)
	t.Logf("single voter elected itself %v after Open", elected)
	if !l.IsLeader || l.Leader != "front" || l.Seq != 1 || l.Term == 0 {
		t.Fatalf("first leadership change %+v", l)
	}
	if elected > time.Second {
		t.Errorf("single-voter election took %v", elected)
	}
	ctx := context.Background()
	if _, err := r.Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	setJob(t, r, 64)
	if _, err := r.Apply(ctx, rankBatch(0, 64, 1)); err != nil {
		t.Fatal(err)
	}
	// A refused command is reported as such.
	if _, err := r.Apply(ctx, &SetJob{Job: JobSpec{ID: "other", Size: 1}}); !errors.Is(err, ErrRefused) {
		t.Fatalf("conflicting SetJob: %v", err)
	}

	// While it runs, its files are locked: inspection and a second
	// replica fail fast.
	for _, p := range []string{filepath.Join(dir, "front"), filepath.Join(dir, "front", dbFile)} {
		t0 := time.Now()
		_, err := OpenReadOnly(p)
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("inspect %s while running: %v", p, err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("ErrLocked took %v", d)
		}
		t.Logf("inspect while running: %v after %v", err, time.Since(t0))
	}
	_, tr2 := raft.NewInmemTransport("")
	defer tr2.Close()
	if _, err := Open(Config{StateDir: dir, Name: "front", Transport: tr2}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second replica on the same directory: %v", err)
	}

	live := r.FSM().Digest()
	if err := r.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown(); err != nil { // idempotent
		t.Fatal(err)
	}
	var last Leadership
	for l := range r.Leadership() {
		last = l
	}
	if last.IsLeader {
		t.Errorf("the last leadership change after shutdown is %+v", last)
	}
	in, err := OpenReadOnly(filepath.Join(dir, "front", dbFile))
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Digest() != live {
		t.Fatal("state read back differs")
	}
	if in.LastIndex == 0 || in.CurrentTerm == 0 || in.LastVoteCandidate != string(addr) {
		t.Errorf("raft metadata: last index %d term %d vote %q", in.LastIndex, in.CurrentTerm, in.LastVoteCandidate)
	}

	// Reopened, the replica restores the same state and stays leader.
	r2, err := Open(Config{StateDir: dir, Name: "front", Transport: tr2, Peers: []raft.Server{{Suffrage: raft.Voter, ID: "front", Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Shutdown()
	if l := <-r2.Leadership(); !l.IsLeader {
		t.Fatalf("after reopening: %+v", l)
	}
	if err := r2.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if r2.FSM().Digest() != live {
		t.Fatal("state after reopening differs")
	}
	// Another node's name on this directory is refused.
	if err := r2.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "front"), filepath.Join(dir, "back")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config{StateDir: dir, Name: "back", Transport: tr2}); !errors.Is(err, ErrForeign) {
		t.Fatalf("directory of another node: %v", err)
	}
}

// tcpStream is a plain TCP raft.StreamLayer for the test.
type tcpStream struct{ net.Listener }

func (s tcpStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func TestTCPTransport(t *testing.T) {
	dir := t.TempDir()
	var trans []*raft.NetworkTransport
	var peers []raft.Server
	for i := range 3 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tr := NewTCPTransport(tcpStream{ln})
		defer tr.Close()
		trans = append(trans, tr)
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(fmt.Sprintf("t%d", i)), Address: tr.LocalAddr()})
	}
	var rs []*Replica
	var ws []*watcher
	for i := range 3 {
		r, err := Open(Config{StateDir: dir, Name: fmt.Sprintf("t%d", i), Transport: trans[i], Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Shutdown()
		rs = append(rs, r)
		ws = append(ws, watch(r))
	}
	leader := -1
	waitFor(t, 10*time.Second, "a leader over TCP", func() bool {
		for i, w := range ws {
			if w.isLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	ctx := context.Background()
	if _, err := rs[leader].Takeover(ctx); err != nil {
		t.Fatal(err)
	}
	setJob(t, rs[leader], 32)
	want := rs[leader].FSM().AppliedIndex()
	for _, r := range rs {
		waitFor(t, 10*time.Second, "replication over TCP", func() bool { return r.FSM().AppliedIndex() >= want })
		if r.FSM().Digest() != rs[leader].FSM().Digest() {
			t.Error("digests differ")
		}
	}
}

// TestIsolatedLeader: a leader cut off from its group cannot confirm its
// leadership, its commands time out as indeterminate, and it reports the
// loss on its leadership stream; the majority elects a new leader.
func TestIsolatedLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGroup(t, 3, nil)
		l := g.leader(10*time.Second, nil)
		r := g.replicas[l]
		ctx := context.Background()
		if err := r.VerifyLeader(ctx); err != nil {
			t.Fatal(err)
		}
		g.isolate(l)
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := r.Apply(short, &AppendEvents{Events: []Event{{Kind: EventLaunch, Rank: NoRank, Detail: "x"}}})
		cancel()
		if !errors.Is(err, ErrIndeterminate) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("apply on an isolated leader: %v", err)
		}
		if err := r.VerifyLeader(ctx); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("VerifyLeader on an isolated leader: %v", err)
		}
		waitFor(t, 5*time.Second, "the isolated leader to report its loss", func() bool { return !g.watchers[l].isLeader() })
		l2 := g.leader(10*time.Second, map[int]bool{l: true})
		if l2 == l {
			t.Fatal("the isolated replica is still the leader")
		}
		if _, err := g.replicas[l2].Takeover(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTCPTransportDoesNotPipeline: the transport refuses pipelined
// replication (NewTCPTransport says why: raft's pipeline can deadlock on a
// follower's refusal), so raft replicates one AppendEntries at a time.
func TestTCPTransportDoesNotPipeline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTCPTransport(tcpStream{ln})
	defer tr.Close()
	if p, err := tr.AppendEntriesPipeline("peer", tr.LocalAddr()); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		if p != nil {
			p.Close()
		}
		t.Fatalf("AppendEntriesPipeline: %v, want raft.ErrPipelineReplicationNotSupported", err)
	}
}
