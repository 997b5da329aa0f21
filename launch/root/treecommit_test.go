package root

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// sentConn is a root's link to a child of the root that records what the
// root writes on it, and calls wrote with each write as it happens.
type sentConn struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote func()
}

func (c *sentConn) Read([]byte) (int, error) { return 0, io.EOF }
func (c *sentConn) Close() error             { return nil }
func (c *sentConn) Write(p []byte) (int, error) {
	c.wrote()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

// frames are the frames written so far.
func (c *sentConn) frames(t *testing.T) []wire.Frame {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := wire.NewReader(bytes.NewReader(c.buf.Bytes()), 1<<20)
	var fs []wire.Frame
	for {
		f, err := r.Next()
		if err != nil {
			return fs
		}
		fs = append(fs, wire.Frame{Type: f.Type, Payload: bytes.Clone(f.Payload)})
	}
}

// TestTreeChangeCommittedFirst: an agent's move to its backup parent (n2,
// below n0, moves below n1) is committed to the state log before the
// root tells any agent of it: while the commit is held, nothing goes to
// the agents, what the root sends the moved agent meanwhile waits with
// it, and once the commit is in, every write finds the new edge in the
// state log — the routes to the new parent first, then the moved agent's
// resync request and what waited.
func TestTreeChangeCommittedFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	hold := make(chan struct{})
	j, err := journal.Open(ctx, journal.Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Hold: hold,
		Job: journal.Job{ID: "tree-commit", N: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Close(context.Background(), 0, "") }()
	tr, err := topology.FromEdges("test", []topology.Edge{
		{Name: "n0", Parent: topology.Root, Backup: topology.None},
		{Name: "n1", Parent: topology.Root, Backup: topology.None},
		{Name: "n2", Parent: 0, Backup: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	// committed reports whether the state log has n2 below n1.
	committed := func() bool {
		fsm := j.FSM()
		if fsm == nil {
			return false
		}
		ok := false
		fsm.View(func(s *raftstore.State) {
			for _, n := range s.Plan.Nodes {
				ok = ok || n.Name == "n2" && n.Primary == "n1"
			}
		})
		return ok
	}
	var early []string
	conns := make([]*sentConn, 2)
	for i := range conns {
		conns[i] = &sentConn{wrote: func() {
			if !committed() {
				early = append(early, "a write to n"+string(rune('0'+i))+" before the commit")
			}
		}}
	}
	var observed []Event
	fe := &frontend{ctx: ctx, events: make(chan event, 8), ioState: ioState{out: output.NewWriter(io.Discard, io.Discard, false)}, colls: proto.NewGather(3),
		opts: Options{Observe: func(ev Event) { observed = append(observed, ev) }}}
	fe.journal = journal.GroupOf(j)
	fe.topo, fe.tree = tr, true
	for i, name := range []string{"n0", "n1", "n2"} {
		a := &agentHandle{idx: i, name: name, inc: 1}
		if i < 2 {
			a.link = proto.NewLink(conns[i])
			a.via = a.link
		}
		fe.agents = append(fe.agents, a)
	}
	fe.agents[2].via = fe.agents[0].link
	fe.rec = recovery.New(recovery.Config{Policy: recovery.Rank, Ranks: 3, Agents: 3, RankAgent: []int{0, 1, 2}, Tree: tr, Up: []bool{true, true, true}})

	fe.step(recovery.Reparented{Agent: 2, Parent: 1, Incarnation: 1})
	if tr.Parent(2) != 1 {
		t.Fatalf("the planner did not move n2 below n1: parent %d", tr.Parent(2))
	}
	_ = fe.agents[2].send(proto.MRespawn, []byte("waits")) // sent during the commit: held
	select {
	case ev := <-fe.events:
		t.Fatalf("the root heard of a commit that is held: %#v", ev)
	default:
	}
	for i, c := range conns {
		if fs := c.frames(t); len(fs) != 0 {
			t.Errorf("n%d was sent %d frame(s) while the move's commit was held", i, len(fs))
		}
	}
	if len(observed) != 0 {
		t.Errorf("observed %v while the move's commit was held", observed)
	}

	close(hold)
	select {
	case ev := <-fe.events:
		tc, ok := ev.(evTreeCommitted)
		if !ok || tc.err != nil {
			t.Fatalf("event %#v, want the tree's commit", ev)
		}
		fe.treeCommitted(tc)
	case <-time.After(10 * time.Second):
		t.Fatal("the move was not committed within 10 s")
	}
	if len(early) > 0 {
		t.Errorf("%v", early)
	}
	if len(conns[0].frames(t)) != 0 {
		t.Errorf("n0, the lost parent, was sent %d frame(s)", len(conns[0].frames(t)))
	}
	var got []string
	for _, f := range conns[1].frames(t) {
		switch f.Type {
		case proto.MRoutes:
			r, err := proto.DecodeRoutes(f.Payload)
			if err != nil || r.Via != 2 || len(r.Agents) != 1 || r.Agents[0] != 2 {
				t.Errorf("routes %+v (%v), want n2 via n2", r, err)
			}
			got = append(got, "routes")
		case proto.MRoute:
			node, typ, _, err := proto.Unwrap(f.Payload, true)
			if err != nil || node != 2 {
				t.Errorf("routed to %d (%v), want n2", node, err)
			}
			got = append(got, map[uint8]string{proto.MResyncReq: "resync", proto.MRespawn: "held"}[typ])
		default:
			got = append(got, "other")
		}
	}
	if want := []string{"routes", "resync", "held"}; !slices.Equal(got, want) {
		t.Errorf("n1 was sent %v, want %v", got, want)
	}
	if len(observed) != 1 || observed[0] != (Reparented{Node: "n2", Parent: "n1"}) {
		t.Errorf("observed %v, want n2 reparented below n1", observed)
	}
	cancel()
	fe.wg.Wait()
}

// TestRootTellsFrontEndVotes: a root, of either role, tells its children
// that the front-end votes in the replica group until a successor put a
// replica in its voter's place, and names no replica agent before all are
// up.
func TestRootTellsFrontEndVotes(t *testing.T) {
	for _, r := range []role{roleFrontEnd, roleSuccessor} {
		fe := newFrontend(r, Options{N: 1}, output.NewWriter(io.Discard, io.Discard, false), "j", testHooks{})
		got, err := proto.DecodeReplicas(fe.replicas.Encode())
		if err != nil || !got.FrontEndVotes || len(got.Peers) != 0 {
			t.Fatalf("role %d: told %+v (%v), want the front-end's vote and no peers", r, got, err)
		}
	}
}

// TestBroadcastWaitsBehindHeldMove: an agent the root adopted (n1, now a
// child of the root on a link of its own) whose move is not committed yet
// gets a broadcast after what waits for it (the answers it missed), not
// before: a recovery's Suspend ahead of a Publish's answer sent again had
// its ranks call Publish again while the others were in their next
// collective (make test: TestHarnessReparentToRoot, "called publish while
// others called allgather"). n0, not moving, gets it at once.
func TestBroadcastWaitsBehindHeldMove(t *testing.T) {
	tr, err := topology.FromEdges("test", []topology.Edge{
		{Name: "n0", Parent: topology.Root, Backup: topology.None},
		{Name: "n1", Parent: topology.Root, Backup: topology.None},
	})
	if err != nil {
		t.Fatal(err)
	}
	conns := []*sentConn{{wrote: func() {}}, {wrote: func() {}}}
	fe := &frontend{ctx: t.Context(), colls: proto.NewGather(2)}
	fe.topo, fe.tree = tr, true
	for i, name := range []string{"n0", "n1"} {
		a := &agentHandle{idx: i, name: name, inc: 1, link: proto.NewLink(conns[i])}
		a.via = a.link
		fe.agents = append(fe.agents, a)
	}
	fe.rec = recovery.New(recovery.Config{Policy: recovery.Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, Tree: tr, Up: []bool{true, true}})
	fe.agents[1].route.Await(7) // its move (change 7) is being committed
	_ = fe.agents[1].send(proto.MBcast, proto.Wrap(-1, proto.MCollResult, []byte("answer")))
	if n := fe.bcast(proto.MSuspend, []byte("suspend")); n == 0 {
		t.Errorf("bcast counted no bytes")
	}
	types := func(c *sentConn) []uint8 {
		var ts []uint8
		for _, f := range c.frames(t) {
			_, typ, _, err := proto.Unwrap(f.Payload, false)
			if f.Type != proto.MBcast || err != nil {
				t.Fatalf("frame %d (%v), want a broadcast", f.Type, err)
			}
			ts = append(ts, typ)
		}
		return ts
	}
	if got := types(conns[0]); !slices.Equal(got, []uint8{proto.MSuspend}) {
		t.Errorf("n0 was sent %v, want the suspend", got)
	}
	if got := types(conns[1]); len(got) != 0 {
		t.Errorf("n1 was sent %v while its move's commit was held", got)
	}
	fe.agents[1].route.Commit(7)
	fe.agents[1].flush()
	if got := types(conns[1]); !slices.Equal(got, []uint8{proto.MCollResult, proto.MSuspend}) {
		t.Errorf("n1 was sent %v, want the answer it missed, then the suspend", got)
	}
}

// An agent that joins the root late hears of the job's end: the shutdown
// once the ranks ended (even if a terminate came before), the terminate
// while the ranks are being ended, nothing while the job runs.
func TestLateWord(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		shutdown, terminating bool
		want                  uint8 // 0: none
	}{
		{"running", false, false, 0},
		{"terminating", false, true, proto.MTerminate},
		{"shut down", true, false, proto.MShutdown},
		{"shut down after a terminate", true, true, proto.MShutdown},
	} {
		fe := &frontend{opts: Options{KillAfter: 3 * time.Second}, terminating: tc.terminating}
		if tc.shutdown {
			fe.shutdownAt = time.Now()
		}
		w := fe.lateWord()
		if tc.want == 0 {
			if w != nil {
				t.Errorf("%s: a word %x", tc.name, w)
			}
			continue
		}
		_, typ, _, err := proto.Unwrap(w, false)
		if err != nil || typ != tc.want {
			t.Errorf("%s: type %d (%v), want %d", tc.name, typ, err, tc.want)
		}
	}
}
