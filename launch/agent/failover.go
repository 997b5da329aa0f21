package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Root failover (--replicas 3 or 5), agents' side. An agent of a replicated
// job survives its front-end: it ignores its session's end (stdin EOF), and
// a child of the root that loses its parent keeps its ranks and asks the
// replica agents, in turn, to adopt it; the one that leads the raft group
// after the front-end's death runs a successor root
// (launch/root/successor.go) and adopts it. Meanwhile everything the agent
// sends up (its own messages and those it relays) waits in a bounded
// buffer, and once adopted it reports again what a new root needs: its
// ranks, their exits, its unanswered collective contributions.

// leaderlessTrace is how long a replica agent whose front-end is gone
// waits for the group to elect a leader before it traces the group's state
// (an election takes well under a second).
const leaderlessTrace = 5 * time.Second

// maxPending bounds what an agent buffers for its parent while it has none.
const maxPending = 64 << 20

// uplink is an agent's way up: its parent link, or, between a lost parent
// and an adoption, a buffer.
type uplink struct {
	mu      sync.Mutex
	l       *proto.Link
	down    bool // no parent: buffer
	pending [][2][]byte
	size    int
}

// send writes a frame up, or buffers it while the agent has no parent. A
// failed write of an agent that may be adopted buffers the frame too.
func (u *uplink) send(typ uint8, p []byte, buffer bool) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.down {
		err := u.l.Send(typ, p)
		if err == nil || !buffer {
			return err
		}
		u.down = true
	}
	if !buffer {
		return errors.New("no parent link")
	}
	if u.size+len(p) > maxPending {
		return fmt.Errorf("more than %d bytes wait for a new root", maxPending)
	}
	u.pending = append(u.pending, [2][]byte{{typ}, append([]byte(nil), p...)})
	u.size += len(p)
	return nil
}

// lose marks the parent gone: frames wait from now on.
func (u *uplink) lose() {
	u.mu.Lock()
	u.down = true
	u.mu.Unlock()
}

// attach takes a new parent link and sends what waited.
func (u *uplink) attach(l *proto.Link) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.l, u.down = l, false
	for _, f := range u.pending {
		if err := l.Send(f[0][0], f[1]); err != nil {
			return err
		}
	}
	u.pending, u.size = nil, 0
	return nil
}

// survives reports whether the agent outlives the loss of its parent: a
// child of the root in a replicated job.
func (a *Agent) survives() bool {
	return a.tree != nil && a.spec.Survive && a.isRootChild()
}

// frontEndVoter names the front-end among the root's voters (goneRoots).
const frontEndVoter = "\x00front-end"

// errNoQuorum: too many of the root's voters are dead for any replica to
// lead again: no root will adopt this agent.
var errNoQuorum = errors.New("the root replica group lost its majority")

// rootGone notes the end of the link to the root this agent reported to:
// a link that ended (EOF, reset) rather than fell silent means that root's
// process ended, and its voter with it.
func (a *Agent) rootGone(err error) {
	if errors.Is(err, proto.ErrHeartbeat) {
		return // silent: perhaps cut off, perhaps alive
	}
	a.mu.Lock()
	root := cmp.Or(a.fo.rootReplica, frontEndVoter)
	a.mu.Unlock()
	a.voterGone(root)
}

// voterGone notes a voter of the root's group known dead.
func (a *Agent) voterGone(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fo.goneRoots == nil {
		a.fo.goneRoots = map[string]bool{}
	}
	a.fo.goneRoots[name] = true
}

// goneAgents names the replica agent whose successor root this agent
// reported to, once its link to it ended rather than fell silent
// (rootGone): that root's process, and the agent it ran in, are gone. A
// voter known gone only because its address refused a connection is not
// named: a replica agent started again elsewhere may not have told this
// one its new address yet.
func (a *Agent) goneAgents() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r := a.fo.rootReplica; r != "" && r != a.spec.Node && a.fo.goneRoots[r] {
		return []string{r}
	}
	return nil
}

// quorumLost reports whether the voters known dead (the front-end and the
// replica agents) leave the group without a majority: no successor can be
// elected, so waiting for adoption is waiting for nothing.
func (a *Agent) quorumLost() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	voters, gone := len(a.fo.replicas), 0
	if !a.fo.frontEndOut {
		voters++
	}
	names := make([]string, 0, len(a.fo.goneRoots))
	for n := range a.fo.goneRoots {
		if n == frontEndVoter && a.fo.frontEndOut {
			continue // not a voter any more
		}
		gone++
		names = append(names, strings.TrimPrefix(n, "\x00"))
	}
	if voters-gone >= voters/2+1 {
		return nil
	}
	slices.Sort(names)
	return fmt.Errorf("%w: %s gone, %d of %d voters left: no root can take over", errNoQuorum, strings.Join(names, ", "), voters-gone, voters)
}

// seekAdoption looks for the successor root among the replica agents until
// one adopts this agent, adoptWait passes, or too many voters are known
// dead for any successor to come (quorumLost).
//
// lostAt is where the lost front-end listened ("": unknown, or the lost
// root was a successor). A link that fell silent (a partition) says
// nothing of the front-end's life, so it is asked too: alive, it answers
// as any root does (the planner's AdoptAsked): an incarnation it declared
// lost is told so (errFenced: the agent kills its ranks at once), one it
// did not is adopted back; deposed, it holds the request and the ask
// times out. Once its address refuses connections its process is gone, a
// voter less. Without this an agent cut off until the job's end, whose
// peers had exited, sought a root for the whole AdoptWait (30 s) before
// it ended.
func (a *Agent) seekAdoption(ctx context.Context, lostAt string) (*proto.Link, error) {
	deadline := time.Now().Add(a.spec.Timing.AdoptWait())
	for time.Now().Before(deadline) {
		if err := a.quorumLost(); err != nil {
			return nil, err
		}
		a.mu.Lock()
		peers := append([]proto.PeerAddr(nil), a.fo.replicas...)
		a.mu.Unlock()
		for _, p := range peers {
			l, err := a.askAdoption(ctx, p)
			if err != nil {
				return nil, err
			}
			if l != nil {
				a.mu.Lock()
				a.fo.rootReplica = p.Name
				a.mu.Unlock()
				return l, nil
			}
		}
		// The front-end last: a successor, if there is one, first.
		if lostAt != "" {
			if proto.Refused(ctx, lostAt) {
				a.rootGone(nil)
				lostAt = ""
				continue // quorumLost looks again at once
			}
			if l, err := a.askAdoption(ctx, proto.PeerAddr{Name: proto.RootName, Addr: lostAt, Idx: -1}); err != nil || l != nil {
				return l, err
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no root adopted node %s within %v", a.spec.Node, a.spec.Timing.AdoptWait())
}

// askAdoption asks one replica agent; it returns the new parent link if
// that agent runs the successor root, or errFenced if it answers that
// this incarnation was declared lost.
func (a *Agent) askAdoption(ctx context.Context, p proto.PeerAddr) (*proto.Link, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := secure.Dial(dctx, p.Addr, a.tree.creds, secure.WithPeerName(p.Name))
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) && p.Idx >= 0 && p.Name != a.spec.Node {
			// Its host answers, its agent is gone: a voter less.
			a.voterGone(p.Name)
		}
		return nil, nil
	}
	if err := wire.WriteFrame(conn, proto.MHello, proto.Hello{Idx: a.tree.idx, Adopt: true, Inc: a.tree.inc}.Encode()); err != nil {
		conn.Close()
		return nil, nil
	}
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	f, err := wire.ReadFrame(conn, 1024)
	_ = conn.SetReadDeadline(time.Time{})
	switch {
	case err == nil && f.Type == proto.MAdopted:
		return proto.NewLink(conn), nil
	case err == nil && f.Type == proto.MFenced:
		conn.Close()
		return nil, fmt.Errorf("%w (told by %s)", errFenced, p.Name)
	}
	conn.Close()
	return nil, nil
}

// resync reports again what a new root needs to know of this node: its
// children that are up, its ranks, their exits, and the collective
// contributions not yet answered.
func (a *Agent) resync() {
	if t := a.tree; t != nil {
		// Children first: a successor that does not know one is up (the
		// front-end died before it recorded it) sends it its share.
		t.mu.Lock()
		ups := make([]proto.ChildUp, 0, len(t.ups))
		for _, u := range t.ups {
			ups = append(ups, u)
		}
		t.mu.Unlock()
		for _, u := range ups {
			a.send(proto.MChildUp, u.Encode())
		}
	}
	// What the ranks hold of the restart protocol first, before their
	// exits: a successor whose replicated state lacks the node table (the
	// front-end was cut off or died before it was committed) learns it
	// here, and which ranks opened the protocol.
	a.mu.Lock()
	table := a.sup.rec.table
	opened := slices.Clone(a.fo.openedProto)
	a.mu.Unlock()
	if table != nil {
		a.send(proto.MTableHeld, (&proto.CollResult{Op: rankproto.OpPublish, Values: table}).Encode())
	}
	for _, r := range opened {
		a.protocolOpened(r)
	}
	var st proto.Started
	a.mu.Lock()
	for _, r := range a.sup.order {
		rp := a.sup.ranks[r]
		if rp.cmd.Process == nil {
			continue // a relaunched agent's rank not started again yet
		}
		st.Ranks = append(st.Ranks, r)
		st.Pids = append(st.Pids, rp.cmd.Process.Pid)
		st.Incs = append(st.Incs, rp.info.Incarnation)
	}
	a.mu.Unlock()
	if len(st.Ranks) > 0 {
		a.send(proto.MStarted, st.Encode())
	}
	a.mu.Lock()
	exits := make([]proto.RankStatus, 0, len(a.fo.exits))
	for _, s := range a.fo.exits {
		exits = append(exits, s)
	}
	contribs := make([][]byte, 0, len(a.coll.sentUp))
	for _, p := range a.coll.sentUp {
		contribs = append(contribs, p)
	}
	a.mu.Unlock()
	// Output before exits, as always: a rank's exit follows its output.
	a.outQ.Resend(a.send)
	for _, s := range exits {
		a.send(proto.MExit, s.Encode())
	}
	for _, p := range contribs {
		a.send(proto.MContrib, p)
	}
	for _, ask := range a.ringAsks() {
		a.send(proto.MRingAsk, ask.Encode())
	}
}

// stdinWatch watches an agent's stdin for its session's end: gone closes
// once it reached EOF (an agent that does not survive its parent ends
// then); stop joins its goroutine.
type stdinWatch struct {
	r          io.Reader
	gone, done chan struct{}
}

func watchStdin(stdin io.Reader) *stdinWatch {
	w := &stdinWatch{r: stdin, gone: make(chan struct{}), done: make(chan struct{})}
	go func() { // joined by stop
		defer close(w.done)
		buf := make([]byte, 512)
		for {
			if _, err := stdin.Read(buf); err != nil {
				close(w.gone)
				return
			}
		}
	}()
	return w
}

// stdinStopWait bounds stop's wait for a read it could not interrupt.
const stdinStopWait = 200 * time.Millisecond

// stop ends the watch once the agent is done and joins its goroutine: a
// read of a pipe or socket read through Go's poller (pollableStdin) is
// interrupted by a deadline, a test's pipe by its close; one that cannot
// be interrupted (a terminal's) is waited for stdinStopWait at most and
// left to the process's exit.
func (w *stdinWatch) stop() {
	interruptRead(w.r)
	awaitRead(w.done)
}

// watchLeadership takes over the root when this agent's replica leads and
// the front-end is gone (this agent lost its link to it).
func (a *Agent) watchLeadership(ctx context.Context, ar *agentReplica) {
	// Level-triggered: raft's leadership channel may drop changes, and a
	// replica that already leads when the front-end dies (a leadership
	// blip handed back too late, a transfer that failed) gets no new
	// event. So the state is looked at on every event and every tick.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hb := a.spec.Heartbeat
	var leadingSince time.Time // leading and not handed on since
	var lastErr string         // the last failure to take over, said once
	var leaderless time.Time   // since when the front-end is gone and no leader known
	var toldLeaderless bool    // ... and it was said
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ar.r.Leadership():
			if !ok {
				return
			}
		case <-tick.C:
		}
		if !ar.r.IsLeader() {
			leadingSince = time.Time{}
			if id, _ := ar.r.Leader(); id != "" || !a.up.isDown() {
				leaderless, toldLeaderless = time.Time{}, false
			} else if leaderless.IsZero() {
				leaderless = time.Now()
			} else if !toldLeaderless && time.Since(leaderless) > leaderlessTrace {
				// A group that elects no one takes no one over: say
				// what this replica sees of it.
				toldLeaderless = true
				st := ar.r.Raft().Stats()
				a.traceFailover("the front-end is gone and the root replica group elected no leader in %v: this replica is %s in term %s, last log index %s, configuration %s",
					leaderlessTrace, st["state"], st["term"], st["last_log_index"], st["latest_configuration"])
			}
			continue
		}
		if !a.spec.RootChild {
			// Only a child of the root can tell that the front-end is
			// gone (it loses its link) and take its place: hand the
			// leadership on (raft picks the most up-to-date follower),
			// again a while later if it is still here.
			if leadingSince.IsZero() || time.Since(leadingSince) > a.spec.Timing.LinkTimeout(hb) {
				leadingSince = time.Now()
				a.goFunc(func() { _ = ar.r.TransferLeadership(ctx, "", "") })
			}
			continue
		}
		if a.up.isDown() {
			if err := a.takeOver(ctx, ar); err != nil {
				if msg := err.Error(); msg != lastErr {
					lastErr = msg
					a.logf("take over the root: %v", err)
					a.traceFailover("take over the root: %v", err)
				}
				continue // again on the next tick, while this replica leads
			}
			return
		}
		// Leading while the front-end still holds our link is a
		// leadership blip, not its death: wait to lose the link (as long
		// as the link takes to notice a silent peer), else the front-end
		// lives, writes the job's log and must lead: hand it back. A
		// successor that adopted this agent gets it back sooner: its log
		// gives up on a write it cannot make within seconds (the job's
		// final status, 5 s), and were it dead, the transfer would fail
		// and the link would end all the same.
		// A front-end heard from since this replica began to lead is
		// alive: it was paused past raft's lease (a GC pause, VM steal,
		// SIGSTOP) or its raft traffic was cut. It gets the lead back at
		// once; it acts on nothing until it leads again (launch/journal's
		// Watch), and steps aside if it cannot.
		if leadingSince.IsZero() {
			leadingSince = time.Now()
		}
		wait := a.spec.Timing.LinkTimeout(hb) + a.spec.Timing.SlackOr()
		a.mu.Lock()
		if a.fo.rootReplica != "" {
			wait = time.Second
		}
		a.mu.Unlock()
		if a.up.heardSince(leadingSince) {
			wait = handBackAlive
		}
		if time.Since(leadingSince) > wait {
			leadingSince = time.Now() // and again after as long, if it did not take
			a.goFunc(func() { a.leadershipToRoot(ctx, ar) })
		}
	}
}

// traceFailover appends a line to the job's directory: a replica agent
// whose front-end died has no one reading its stderr any more.
func (a *Agent) traceFailover(format string, args ...any) {
	rs := a.replicaSpec()
	if rs.JobDir == "" {
		return // not a replica agent: its parent forwards its stderr
	}
	f, err := os.OpenFile(filepath.Join(rs.JobDir, "failover."+a.spec.Node+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339Nano)}, args...)...)
}

// leadershipToRoot transfers the raft leadership to the replica of the
// root this agent reports to: the front-end's (the member that is none of
// the replica agents), or, once a successor adopted this agent, that of
// the replica agent that runs it. The successor's state log writes only
// while its replica leads.
func (a *Agent) leadershipToRoot(ctx context.Context, ar *agentReplica) {
	a.mu.Lock()
	root := a.fo.rootReplica
	agents := map[string]bool{a.spec.Node: true}
	for _, p := range a.fo.replicas {
		agents[p.Name] = true
	}
	a.mu.Unlock()
	f := ar.r.Raft().GetConfiguration()
	if f.Error() != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && (root == "" && !agents[string(srv.ID)] || root != "" && string(srv.ID) == root) {
			if err := ar.r.TransferLeadership(ctx, srv.ID, srv.Address); err != nil {
				a.traceFailover("hand the leadership back to %s: %v", srv.ID, err)
			}
			return
		}
	}
}

// heardSince reports whether the parent was heard from (any frame) after
// t, over a link that is up.
func (u *uplink) heardSince(t time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return !u.down && u.l != nil && u.l.Quiet() < time.Since(t)
}

// handBackAlive is how long a replica agent that leads waits before it
// hands the lead back to a front-end it heard from since: long enough
// for a leadership blip to settle (raft's own election, 0.3-0.9 s).
const handBackAlive = 500 * time.Millisecond

func (u *uplink) isDown() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.down
}

// takeOver builds and starts the successor root (launch/root's
// resume) from this replica's state.
func (a *Agent) takeOver(ctx context.Context, ar *agentReplica) error {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := ar.r.Takeover(tctx); err != nil {
		return err
	}
	a.mu.Lock()
	peers := slices.Clone(a.fo.replicas)
	a.mu.Unlock()
	if a.resumeRoot == nil {
		return errors.New("this agent cannot run a successor root")
	}
	gossip := make(chan membership.Evidence, 64)
	a.mu.Lock()
	a.fo.gossipTo = gossip
	a.mu.Unlock()
	spec := *a.spec
	spec.Replica = a.replicaSpec() // a replica given later included
	// The successor root runs until it ends or this agent stops it
	// (stopSuccessor), in a context of its own that this agent cancels:
	// it outlives the agent's link and the context the agent runs in
	// (the front-end's, for an agent in its process), not the agent.
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s, err := a.resumeRoot(sctx, launcher.ResumeConfig{
		Spec: &spec, Replica: ar.r, Peers: peers,
		Relaunch: a.relaunch, Fence: a.fence, Gossip: gossip, Gone: a.goneAgents(),
	})
	if err != nil {
		stop()
		return err
	}
	a.mu.Lock()
	over := a.fo.successor.over
	a.fo.successor.s, a.fo.successor.stop = s, stop
	a.mu.Unlock()
	if over {
		// The agent ended its link meanwhile and stopped its successor
		// already: this one is stopped and joined here.
		stop()
		s.Wait(untilEnded)
	}
	return nil
}

// relaunch starts some of the root's children for the successor root fe:
// over this agent's way of starting its own (its spawner), connecting back
// to a listener of its own with this agent's credentials. Each start is
// reported to report.
func (a *Agent) relaunch(ctx context.Context, cs []proto.ChildSpec, h launcher.RelaunchHooks, report func(launcher.LaunchResult)) error {
	sp, closeSp, err := a.spawner()
	if err != nil {
		return err
	}
	if _, ok := sp.(launcher.LocalSpawner); ok {
		sp = launcher.LocalSpawner{} // test delays were for the first launch
	}
	addr := ":0"
	if a.spec.Launch.Mode == "local" {
		addr = "127.0.0.1:0"
	}
	ln, err := secure.Listen(ctx, "tcp", addr, a.tree.creds)
	if err != nil {
		closeSp()
		return fmt.Errorf("listen for agents: %w", err)
	}
	l := a.childLauncher(sp, ln.Addr().(*net.TCPAddr).Port, 0, cs)
	l.Logf = h.Logf
	h.Go(func() { launcher.AcceptLoop(ln, l, nil, nil) })
	h.Go(func() {
		l.Run(ctx, report)
		<-ctx.Done() // the sessions live as long as the successor
		ln.Close()
		closeSp()
		l.Wait(launcher.SessionsWait) // their watchers, once they ended (bounded)
	})
	return nil
}

// fence runs a fence on node for the successor root this agent runs, with
// this agent's way of starting agents (launch/root/fence.go).
func (a *Agent) fence(ctx context.Context, node string, upTo uint64) (string, error) {
	sp, closeSp, err := a.spawner()
	if err != nil {
		return "", fmt.Errorf("fence node %s: %w", node, err)
	}
	defer closeSp()
	return a.childLauncher(sp, 0, 0, nil).Fence(ctx, a.spec.JobID, node, upTo)
}

// adoptRequest hands a request for adoption to the successor root, if
// this agent runs one; otherwise it refuses by closing the connection.
func (a *Agent) adoptRequest(conn net.Conn, h proto.Hello) {
	a.mu.Lock()
	s, ar := a.fo.successor.s, a.fo.replica
	a.mu.Unlock()
	if s != nil {
		s.Adopt(conn, h)
		return
	}
	// No root here: refused. An agent whose incarnation the replicated
	// state records as lost learns so, and kills its ranks.
	name, err := secure.PeerName(conn)
	if err == nil && ar != nil {
		var lost bool
		ar.r.FSM().View(func(s *raftstore.State) { lost = s.AgentLost(name, h.Inc) })
		if lost {
			launcher.AdoptRequest{Conn: conn, Hello: h}.Refuse(true)
			return
		}
	}
	conn.Close()
}

// handleFailover executes a message of the root's replica group and
// failover: who the replica agents are, a new root's resync and
// adoption, a replica to host.
func (a *Agent) handleFailover(typ uint8, p []byte) error {
	switch typ {
	case proto.MReplicas:
		rl, err := proto.DecodeReplicas(p)
		if err != nil {
			return fmt.Errorf("replicas message: %w", err)
		}
		a.mu.Lock()
		a.fo.replicas, a.fo.frontEndOut = rl.Peers, !rl.FrontEndVotes
		for _, p := range rl.Peers {
			// A replica started again on that node (the group refilled).
			delete(a.fo.goneRoots, p.Name)
		}
		a.mu.Unlock()
	case proto.MResyncReq:
		a.resync()
	case proto.MAdopted:
	case proto.MSpec:
		// Sent again by a successor root, which cannot tell whether the
		// front-end's copy arrived before it died: this agent has it.
	case proto.MHostReplica:
		rs, err := proto.DecodeReplicaSpec(p)
		if err != nil {
			return fmt.Errorf("host-replica message: %w", err)
		}
		a.hostReplica(rs)
	default:
		return fmt.Errorf("failover message: message type %d", typ)
	}
	return nil
}
