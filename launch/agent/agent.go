package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/pmi"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankenv"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// linkLostGrace bounds how long an agent whose parent vanished lets its
// ranks handle SIGTERM before it kills them.
const linkLostGrace = time.Second

// Agent is the node agent: it receives its node's share of the job on its
// parent link, spawns the node's ranks, serves their rank protocol,
// forwards their output and exit status, and carries out the parent's
// signals and termination. When the parent link is lost it kills every
// rank's process group and returns: no orphans.
type Agent struct {
	log   io.Writer       // the agent's own messages (its stderr: its parent forwards them)
	trace *proto.PhaseLog // its phases, for a front-end's --verbose (nil: none)
	// guard, if set, is an in-process agent's orphan guard: no rank forks
	// before it is ready, and it is told of each rank's process group
	// (its pid) as the rank starts.
	guard launcher.RankGuard
	// resumeRoot builds a successor root (nil: this agent cannot).
	resumeRoot Resume
	link       *proto.Link
	up         *uplink         // how frames reach the parent (buffered while it has none)
	outWin     *proto.Window   // output credit granted by the front-end
	outQ       *proto.OutQueue // output sent and not yet acknowledged

	tree  *treeState      // its place in a launch tree (nil: an agent on a socketpair)
	stage proto.Prestaged // the prestaged program (--prestage), written before the spec

	// Set by run before the first message is handled.
	ctx      context.Context
	wg       *sync.WaitGroup
	stopLink context.CancelFunc
	stopped  atomic.Bool // the agent ended its link after a shutdown
	jobOver  atomic.Bool // told the job is over (MShutdown): its end is committed

	spec *proto.NodeSpec

	mu sync.Mutex // guards sup, coll and fo (each says what it holds)

	sup  supervision   // the node's ranks: their processes, ends and restarts
	coll collectives   // the collectives and PMI key spaces the node takes part in
	fo   failoverState // the root replica role, and the root's failover as this agent sees it
	par  parentLinks   // the parents beside the primary: backup, fallbacks, the root's adoption
}

// supervision is the agent's ranks: their processes, which ended, and the
// restart protocol. The map and order are set before the ranks start;
// everything else is guarded by the agent's mu.
type supervision struct {
	ranks map[int]*rankProc
	order []int // ranks in ascending order

	gone    map[int]bool // local ranks that ended (and were not reported as stranding a collective)
	ended   int          // ranks whose exit was reported
	killing bool

	exited chan struct{} // closed when every rank's exit was reported (a respawn makes a new one)

	rec agentRecovery // the restart protocol's state (recovery.go)
}

// answered is the newest collective whose answer an agent took, if any.
// The job's first collective is number 0 (of epoch 0): "number <= newest"
// alone would take it as answered before any answer came, and a child's
// part of it that arrived before the node's own ranks called it was
// dropped as a copy, so the node never sent its part up and the job's
// first Publish hung (chaos, sessions 19 and 20).
type answered struct {
	newest uint64
	any    bool
}

// has reports whether collective seq's answer was taken (or an older one).
func (s answered) has(seq uint64) bool { return s.any && seq <= s.newest }

// take notes that collective seq's answer was taken.
func (s *answered) take(seq uint64) { s.newest, s.any = max(s.newest, seq), true }

// collectives is the node's part in the job's collectives (coll.go) and
// PMI key spaces (pmi.go, pmix.go); guarded by the agent's mu except
// where a field says otherwise.
type collectives struct {
	firstColl     chan struct{} // closed when the node's first collective is answered
	firstCollOnce sync.Once

	seq    map[int]uint64
	colls  map[uint64]*localColl
	sentUp map[uint64][]byte // contributions sent up and not yet answered (sent again to a new root)
	comb   combiner          // the collectives being combined with the children's parts (combine.go)
	// ringKept holds the values this node held of the latest answered
	// rings, ringWait the rings whose answer lacked values some of its
	// ranks need (combine.go).
	ringKept map[uint64]map[int][]byte
	ringWait map[uint64]*ringWait
	// seen is the newest collective whose answer this agent took: an
	// older answer it is not waiting for is one it had (sent again to an
	// agent that moved to a backup parent: root's moved).
	seen answered
	puts map[string][]byte // this node's puts since the last fence
	kv   map[string][]byte // the job's board as of the last fence

	pmiPuts map[string][]byte // this node's PMI puts since the last barrier
	pmiKV   map[string][]byte // the job's PMI key space as of the last barrier
	pmiTCP  *pmiListener      // PMI-1 TCP mode
	pmix    *pmixState        // the PMIx server (pmix.go; nil: none), set before the ranks start

	pmiStats   pmi.Stats // the node's PMI traffic, answered locally
	pmiUp      int64     // bytes of PMI barrier contributions sent up
	pmiBarrier int64     // PMI barriers completed
}

// failoverState is the agent's side of the root's replica group and its
// failover (failover.go, replica.go, gossip.go; the root's successor.go);
// guarded by the agent's mu except where a field says otherwise.
type failoverState struct {
	replicas  []proto.PeerAddr         // the replica agents, which may adopt this one
	exits     map[int]proto.RankStatus // exits reported, to report again to a new root
	successor successorRun             // the root this agent runs after the front-end's death (successor.go)
	replica   *agentReplica            // this agent's root replica, once open
	gossipTo  chan membership.Evidence // the successor root's share of the gossip evidence (gossip.go)
	// openedProto: ranks that opened the rank protocol, to report again
	// to a new root (resync).
	openedProto []int
	// member is the agent's gossip member once it joined (gossip.go; not
	// under mu): the self-fence's watch reads when its probes were last
	// acked.
	member atomic.Pointer[membership.Member]
	// rootReplica names the replica agent whose successor root adopted
	// this agent ("": none did), which its replica hands leadership to.
	rootReplica string
	// goneRoots are the root's voters known dead (their process ended:
	// its link or a connection to it was refused or reset): the
	// front-end (frontEndVoter) and replica agents, by name.
	goneRoots map[string]bool
	// frontEndOut: the front-end no longer votes in the root's group (a
	// successor put a replica in its place).
	frontEndOut bool
	// lateReplica is the root replica a successor root gave this agent
	// after its start (replica.go; nil: none).
	lateReplica *proto.ReplicaSpec
}

// parentLinks are the agent's ways up besides its parent link
// (reparent.go); guarded by the agent's mu except rootChild.
type parentLinks struct {
	// backup is the link to this agent's backup parent (nil: none, or it
	// became the parent link).
	backup *standbyLink
	// fallbacks are the parents to try, in order, when the parent and the
	// backup are both out of reach (MFallbacks: the grandparent, the root).
	fallbacks []proto.PeerAddr
	// rootChild: the root adopted this agent as its own child after its
	// parent and backup were lost (spec.RootChild says it at the start).
	rootChild atomic.Bool
}

func (a *Agent) run(ctx context.Context) error {
	// A parent that connects and then says nothing must not hold the
	// agent forever: the job spec comes first, within connectTimeout.
	dl, hasDeadline := a.link.Conn.(interface{ SetReadDeadline(time.Time) error })
	if hasDeadline {
		_ = dl.SetReadDeadline(time.Now().Add(proto.ConnectTimeout))
	}
	defer a.stage.Remove()
	f, err := a.link.Await(func(f *wire.Frame) (bool, error) {
		switch f.Type {
		case proto.MPrestage: // the program comes before the spec
			c, err := proto.DecodePrestageChunk(f.Payload)
			if err == nil {
				err = a.stage.Add(c)
			}
			return false, err
		case proto.MBcast:
			// A broadcast that overtook this agent's share of the job
			// (the parent relays to every linked child): the end of the
			// job ends the agent; anything else is not for it yet.
			if _, typ, _, uerr := proto.Unwrap(f.Payload, false); uerr == nil && (typ == proto.MShutdown || typ == proto.MTerminate || typ == proto.MKill) {
				f.Type = proto.MShutdown
				return true, nil
			}
			return false, nil
		}
		return true, nil
	})
	if hasDeadline {
		_ = dl.SetReadDeadline(time.Time{})
	}
	if err != nil {
		a.link.Conn.Close()
		return fmt.Errorf("agent: read job spec: %w", err)
	}
	if f.Type == proto.MShutdown { // the job ended before this agent got its share
		a.link.Conn.Close()
		return nil
	}
	if f.Type != proto.MSpec {
		a.link.Conn.Close()
		return fmt.Errorf("agent: first message has type %d, want a job spec", f.Type)
	}
	if a.spec, err = proto.DecodeNodeSpec(f.Payload); err != nil {
		a.link.Conn.Close()
		return fmt.Errorf("agent: %w", err)
	}
	a.trace.Logf("job received: %d rank(s)", len(a.spec.Ranks))
	a.coll.comb.full = a.spec.RootMerge
	if a.spec.Prestage && !a.stage.Done {
		a.link.Conn.Close()
		return fmt.Errorf("agent on %s: the prestaged program did not arrive before the job", a.spec.Node)
	}
	// Deferred calls run last-in first-out: cancel first, so that every
	// goroutine of the agent stops, then wait for them, then end the PMIx
	// server.
	defer a.stopPMIx()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	linkCtx, stopLink := context.WithCancel(ctx)
	defer stopLink()
	a.ctx, a.wg, a.stopLink = ctx, &wg, stopLink
	if a.tree != nil {
		defer a.tree.ln.Close()
		// A root that declares this incarnation lost kills it from outside
		// (ftlaunch agent --fence): it finds the agent by this record
		// (made before it connected back, if its bootstrap named it).
		if t := a.fenceTarget(); t != a.tree.fenced {
			if unregister, err := fence.Register(t); errors.Is(err, fence.ErrFenced) {
				return fmt.Errorf("%w: %w", errFenced, err)
			} else if err != nil {
				a.logf("%v", err)
			} else {
				defer unregister()
			}
		}
		a.startTree(ctx, &wg)
		if gone := a.tree.stdinGone; gone != nil {
			a.endWithSession(ctx, &wg, gone, cancel)
		}
	}
	// Where this agent's output begins, for a root that did not start it
	// (a successor that hears of it from its parent): frame 1.
	a.send(proto.MOutputResync, proto.EncodeInt(1))
	a.startRanks(ctx, &wg)
	a.joinGossip(ctx, &wg)
	a.watchUpward(ctx, &wg)
	if a.tree != nil && a.spec.Replica.JobDir != "" {
		// After the ranks, and not while they start: once their first
		// collective is done, or they all ended, or groupHold passed (as
		// the front-end's own replica). It is shut down when the agent
		// ends, after the front-end committed the job's end (it does
		// before it tells agents to exit, once the replica agents joined).
		replica := make(chan *agentReplica, 1)
		go func() {
			select {
			case <-time.After(proto.GroupHold):
			case <-a.coll.firstColl:
			case <-a.exitedCh():
			case <-ctx.Done():
				replica <- nil
				return
			}
			replica <- a.openReplica(ctx)
		}()
		defer func() {
			if ar := <-replica; ar != nil {
				ar.close(a.jobOver.Load())
			}
		}()
	}

	hb := a.spec.Heartbeat
	l := a.link
	var switched *standbyLink // the parent link is the backup's (reparent.go)
	for {
		if switched != nil {
			err = switched.wait(linkCtx)
		} else {
			err = l.Run(linkCtx, proto.UplinkPing(hb), a.spec.Timing.LinkTimeout(hb), a.handle)
		}
		if errors.Is(err, errShutdown) || a.stopped.Load() || ctx.Err() != nil {
			break
		}
		if a.canSwitch() {
			// The parent is lost: its backup takes this agent, else a
			// fallback parent (the grandparent, the root).
			sb, serr := a.switchToBackup(ctx, err)
			if serr != nil {
				a.logf("%v", serr)
				fsb, fl, ferr := a.switchToFallback(ctx)
				if ferr != nil {
					err = fmt.Errorf("%w; %w; %w", err, serr, ferr)
					break
				}
				if fl != nil {
					// The root took it: its first message, a broadcast
					// resync request, has this agent and those below it
					// report again.
					l, switched = fl, nil
					continue
				}
				sb = fsb
			}
			switched = sb
			continue
		}
		if !a.survives() {
			break
		}
		// The front-end is gone; its successor adopts the agent.
		var lostAt string // where the lost front-end listened
		a.mu.Lock()
		lostFrontEnd := a.fo.rootReplica == ""
		a.mu.Unlock()
		if c, ok := l.Conn.(net.Conn); ok && switched == nil && lostFrontEnd {
			lostAt = c.RemoteAddr().String()
		}
		a.up.lose()
		a.rootGone(err)
		a.logf("lost the front-end (%v); looking for the new root", err)
		nl, aerr := a.seekAdoption(ctx, lostAt)
		if aerr != nil {
			err = fmt.Errorf("%w; %w", err, aerr)
			break
		}
		if err := a.up.attach(nl); err != nil {
			a.logf("adopted by the new root, but what waited for it could not be sent: %v; looking again", err)
			a.traceFailover("adopted by the new root, but what waited for it could not be sent: %v; looking again", err)
			nl.Conn.Close()
			continue
		}
		// The new root's first message, a broadcast resync request,
		// has this agent and those below it report again.
		l, switched = nl, nil
	}
	a.stopSuccessor()
	a.outWin.Close()
	// The link is gone: a shutdown we were told of ends with errShutdown
	// (or, for an agent with children, once they are done too); anything
	// else means the parent died or went silent.
	if errors.Is(err, errShutdown) || a.stopped.Load() {
		a.killAll(syscall.SIGKILL)
		return nil
	}
	if errors.Is(err, errNoQuorum) {
		a.traceFailover("%v", err)
	}
	if errors.Is(err, errFenced) {
		// Replaced already: its ranks go at once, without a grace.
		a.killAll(syscall.SIGKILL)
		return fmt.Errorf("node %s: this agent (incarnation %d) was declared lost and replaced (%w); killed its %d rank(s)", a.spec.Node, a.incarnation(), err, len(a.sup.order))
	}
	a.killAll(syscall.SIGTERM)
	select {
	case <-a.exitedCh():
	case <-time.After(min(a.spec.KillAfter, linkLostGrace)):
	}
	a.killAll(syscall.SIGKILL)
	return fmt.Errorf("node %s: lost the link to the front-end (%w); killed its %d rank(s)", a.spec.Node, err, len(a.sup.order))
}

var errShutdown = errors.New("shutdown")

// errFenced: the root declared this agent incarnation lost.
var errFenced = errors.New("fenced")

// incarnation is the agent's incarnation on its node: 1 for the first,
// one more for each start after a loss (docs/recovery.md).
func (a *Agent) incarnation() uint64 {
	switch {
	case a.tree != nil:
		return max(a.tree.inc, 1)
	case a.spec != nil && a.spec.Relaunch != nil:
		return max(a.spec.Relaunch.Incarnation, 1)
	}
	return 1
}

// fenceTarget names this agent incarnation and its ranks for a fence.
func (a *Agent) fenceTarget() fence.Target {
	return fence.Target{Job: a.spec.JobID, Node: a.spec.Node, UpTo: a.incarnation()}
}

// runRank starts the goroutines that serve a started rank: its stdin, its
// rank protocol, its PMI-1 socket, and the report of its end.
func (a *Agent) runRank(ctx context.Context, rp *rankProc) {
	wg := a.wg
	if rp.stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rp.feedStdin(ctx)
		}()
	}
	wg.Add(3)
	go func() {
		defer wg.Done()
		rp.serveRank(ctx)
	}()
	go func() {
		defer wg.Done()
		defer rp.pmiConn.Close()
		a.servePMI(ctx, rp, rp.pmiConn, rp.rank)
		// The rank keeps its PMI socket for its whole life.
		select {
		case <-ctx.Done():
		case <-rp.exited:
		}
	}()
	go func() {
		defer wg.Done()
		st := rp.wait()
		if rp.replaced.Load() {
			return // ended by a restart of the job: not news
		}
		st.Incarnation = rp.info.Incarnation
		a.reportExit(st)
	}()
}

func (a *Agent) startRanks(ctx context.Context, wg *sync.WaitGroup) {
	if a.spec.Relaunch != nil {
		a.standby(ctx, wg) // the recovery starts them (relaunch.go)
		return
	}
	// The TCP-mode listener exists before the ranks (they get its port)
	// but accepts only once a.sup.ranks is complete.
	if l, err := a.listenPMI(); err == nil {
		a.coll.pmiTCP = l
	}
	var st proto.Started
	localSize := len(a.spec.Ranks)
	resolve := resolveOnce()
	pmixErr := a.startPMIx(ctx, resolve)
	binds, bindErr := rankenv.RankBindings(a.spec.Bind, localSize, a.spec.BindShare)
	// A rank that cannot start for want of processes, descriptors or
	// memory ends the node's start: the ranks it started are killed at
	// once (the job cannot run, and the user is at a limit that every
	// other program of theirs, this agent's runtime included, needs room
	// under), the rank is reported as the job's failure, and the ranks
	// after it as not started. Limits known beforehand (rankRoom) fail
	// the start before any fork.
	room, short := rankenv.RankRoom(localSize)
	if short == nil && pmixErr != nil {
		room, short = 0, pmixErr
	}
	if short != nil {
		// Known before the first fork: nothing is started. The failure
		// goes first, so that the front-end names it.
		a.reportExit(proto.RankStatus{Rank: a.spec.Ranks[room], Code: recovery.ExitLauncher, Reason: "could not start: " + short.Error()})
	}
	stopped := short != nil
	for i, r := range a.spec.Ranks {
		if stopped {
			if short == nil || i != room {
				a.reportExit(proto.RankStatus{Rank: r, Code: recovery.ExitLauncher, Reason: "not started", Skipped: true})
			}
			continue
		}
		info := rankproto.Info{
			Rank: r, Size: a.spec.Size, LocalRank: i, LocalSize: localSize,
			Node: a.spec.Node, NodeID: a.spec.NodeID, JobID: a.spec.JobID, Incarnation: 1,
		}
		if bindErr != nil {
			a.reportExit(proto.RankStatus{Rank: r, Code: recovery.ExitLauncher, Reason: bindErr.Error()})
			continue
		}
		cpus := rankenv.BindingOf(binds, i)
		rp, err := startRank(a.spec, info, a, cpus, resolve)
		if why := rankenv.Shortage(err); why != "" {
			stopped = true
			a.killAll(syscall.SIGKILL)
			a.reportExit(proto.RankStatus{Rank: r, Code: recovery.ExitLauncher, Reason: "could not start: " + why})
			continue
		}
		if err != nil {
			a.reportExit(proto.RankStatus{Rank: r, Code: 127, Reason: err.Error()})
			continue
		}
		rp.cpus = cpus
		a.sup.ranks[r] = rp
		a.sup.order = append(a.sup.order, r)
		st.Ranks = append(st.Ranks, r)
		st.Pids = append(st.Pids, rp.cmd.Process.Pid)
		if cpus != nil {
			st.CPUs = append(st.CPUs, rankenv.CPUList(cpus))
		}
	}
	if len(st.Ranks) > 0 {
		a.send(proto.MStarted, st.Encode())
		a.trace.Logf("%d rank(s) started and reported", len(st.Ranks))
	}
	if l := a.coll.pmiTCP; l != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.serve(ctx, a, wg)
		}()
	}
	for _, r := range a.sup.order {
		a.runRank(ctx, a.sup.ranks[r])
	}
	if len(a.spec.Ranks) == 0 {
		close(a.sup.exited)
	}
}

// send writes to the parent; a failure shows up in the link's reader.
func (a *Agent) send(typ uint8, p []byte) {
	_ = a.up.send(typ, p, a.buffersUp())
}

func (a *Agent) reportExit(s proto.RankStatus) {
	a.mu.Lock()
	a.sup.gone[s.Rank] = true
	a.fo.exits[s.Rank] = s
	var stranded []uint64
	for seq, c := range a.coll.colls {
		if _, ok := c.values[s.Rank]; !ok {
			stranded = append(stranded, seq)
		}
	}
	a.mu.Unlock()
	if len(stranded) > 0 && s.Code == 0 && s.Signal == 0 {
		// The others wait in a collective this rank will never join.
		a.send(proto.MAbort, proto.AbortMsg{Rank: s.Rank, Code: 1, Msg: strandedMsg, Failed: true, Stranded: true}.Encode())
	}
	a.send(proto.MExit, s.Encode())
	a.mu.Lock()
	a.sup.ended++
	if a.sup.ended == len(a.spec.Ranks) {
		// Under the lock: a restart of the job replaces the channel
		// (reviveLocked), and must not find it closed by an end it
		// already counted, nor have its new one closed by this end.
		a.trace.Logf("every rank's exit reported")
		close(a.sup.exited)
	}
	delete(a.sup.rec.stopped, s.Rank)
	waived := a.waiveLocked()
	a.mu.Unlock()
	if waived {
		a.sendCombined()
	}
	a.sup.rec.wake()
}

// waiveLocked tells the combiner (under mu) that the node's ranks join no
// more collectives, once each ended for good: what its children send is
// passed on without the node's part (combine.go). It reports whether it
// did.
func (a *Agent) waiveLocked() bool {
	if len(a.sup.order) == 0 {
		return false
	}
	next := uint64(0)
	for i, r := range a.sup.order {
		if !a.endedForGood(r) {
			return false
		}
		if s := a.coll.seq[r]; i == 0 || s < next {
			next = s
		}
	}
	a.coll.comb.waive(next)
	return true
}

// rank is the current process of local rank r, or nil.
func (a *Agent) rank(r int) *rankProc {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sup.ranks[r]
}

// exitedCh is closed once every rank's end was reported (a respawn
// replaces it).
func (a *Agent) exitedCh() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sup.exited
}

// handle executes one message from the parent, in the handler of its
// family. It runs on the link's reader goroutine.
func (a *Agent) handle(typ uint8, p []byte) error {
	switch typ {
	case proto.MStdin, proto.MOutputAck, proto.MStdinClose, proto.MSignal, proto.MTerminate, proto.MKill, proto.MShutdown:
		return a.handleControl(typ, p)
	case proto.MRingResult:
		res, err := proto.DecodeCollResult(p)
		if err != nil {
			return err
		}
		a.ringDown(res)
		return nil
	case proto.MCollResult:
		res, err := proto.DecodeCollResult(p)
		if err != nil {
			return err
		}
		if res.Op == rankproto.OpRing {
			// The root's merge (FTLAUNCH_COLL_ROOT_MERGE), what it holds
			// sent again to a moved agent, or its fill to an ask.
			a.ringTake(res)
			return nil
		}
		a.collDone(res)
		return nil
	case proto.MRingRecall:
		ask, err := proto.DecodeRingAsk(p)
		if err != nil {
			return err
		}
		a.ringRecalled(ask)
		return nil
	case proto.MSuspend, proto.MRespawn, proto.MPatch, proto.MResume, proto.MRestartJob:
		m, err := proto.DecodeRecMsg(p)
		if err != nil {
			return err
		}
		a.recover(typ, m)
		return nil
	case proto.MRoute, proto.MBcast, proto.MSwitch, proto.MSuspect, proto.MRoutes, proto.MFallbacks, proto.MBackup:
		return a.handleTree(typ, p)
	case proto.MReplicas, proto.MResyncReq, proto.MAdopted, proto.MSpec, proto.MHostReplica:
		return a.handleFailover(typ, p)
	}
	return fmt.Errorf("unknown message type %d from parent", typ)
}

// handleControl executes the parent's control of the node's ranks: their
// stdin and output credit, signals, termination, the job's end.
func (a *Agent) handleControl(typ uint8, p []byte) error {
	switch typ {
	case proto.MStdin:
		if rp := a.rank(0); rp != nil {
			rp.writeStdin(p, func() { a.send(proto.MStdinAck, nil) })
		} else {
			a.send(proto.MStdinAck, nil)
		}
	case proto.MOutputAck:
		seq, err := proto.DecodeSeq(p)
		if err != nil {
			return fmt.Errorf("output acknowledgement: %w", err)
		}
		n, err := a.outQ.Ack(seq)
		if err != nil {
			return err
		}
		a.outWin.Release(n)
	case proto.MStdinClose:
		if rp := a.rank(0); rp != nil {
			rp.closeStdin()
		}
	case proto.MSignal:
		sig, err := proto.DecodeInt(p)
		if err != nil {
			return fmt.Errorf("signal message: %w", err)
		}
		a.killAll(syscall.Signal(sig))
	case proto.MTerminate:
		after, err := proto.DecodeInt(p)
		if err != nil {
			return fmt.Errorf("terminate message: %w", err)
		}
		a.terminate(time.Duration(after))
	case proto.MKill:
		a.killAll(syscall.SIGKILL)
	case proto.MShutdown:
		a.trace.Logf("shutdown received")
		a.jobOver.Store(true)
		// Named: this agent's replica joined the root group; it waits
		// for the final status before it says it is done.
		names, _ := proto.DecodeStrings(p)
		awaitFinal := slices.Contains(names, a.spec.Node)
		a.killAll(syscall.SIGKILL)
		a.mu.Lock()
		st := proto.NodeStats{PMI: a.coll.pmiStats, PMIUp: a.coll.pmiUp, Barrier: a.coll.pmiBarrier}
		a.mu.Unlock()
		if a.tree != nil && a.tree.stopLaunching(true) {
			// Children first: their done and the end of their links go up
			// through us.
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				a.tree.waitChildren(childWait)
				if awaitFinal {
					a.awaitFinalStatus()
				}
				a.send(proto.MDone, st.Encode())
				a.stopped.Store(true)
				a.stopLink()
			}()
			return nil
		}
		if awaitFinal {
			a.awaitFinalStatus()
		}
		a.send(proto.MDone, st.Encode())
		return errShutdown
	default:
		return fmt.Errorf("control message: message type %d", typ)
	}
	return nil
}

// terminate sends SIGTERM to every rank and SIGKILL to those left after d.
func (a *Agent) terminate(d time.Duration) {
	if a.tree != nil {
		a.tree.stopLaunching(false)
	}
	a.mu.Lock()
	if a.sup.killing {
		a.mu.Unlock()
		return
	}
	a.sup.killing = true
	a.mu.Unlock()
	a.killAll(syscall.SIGTERM)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		select {
		case <-a.exitedCh():
		case <-time.After(d):
		case <-a.ctx.Done():
		}
		a.killAll(syscall.SIGKILL)
	}()
}

// killAll signals the process group of every rank that was started. Groups
// of ranks that already ended are signalled too: their leftover children
// share the group.
func (a *Agent) killAll(sig syscall.Signal) {
	a.mu.Lock()
	procs := make([]*rankProc, 0, len(a.sup.order))
	var stopped []*rankProc
	for _, r := range a.sup.order {
		rp := a.sup.ranks[r]
		switch {
		case sig == syscall.SIGCONT && a.sup.rec.stopped[r]:
			continue // held while the recovery suspends it
		case a.sup.rec.stopped[r] && sig != syscall.SIGSTOP:
			// A stopped rank gets a terminating signal only once
			// continued.
			stopped = append(stopped, rp)
			delete(a.sup.rec.stopped, r)
		}
		procs = append(procs, rp)
	}
	a.mu.Unlock()
	for _, rp := range procs {
		rp.signal(sig)
	}
	for _, rp := range stopped {
		rp.signal(syscall.SIGCONT)
	}
}

// logf writes one of the agent's own messages, naming its node.
func (a *Agent) logf(format string, args ...any) {
	node := "?"
	if a.spec != nil {
		node = a.spec.Node
	}
	fmt.Fprintf(a.log, "ftlaunch agent on %s: "+format+"\n", append([]any{node}, args...)...)
}

// endWithSession ends the agent (cancel) once the session that started
// it ended (gone: its parent is gone, or closed it), unless it outlives
// the front-end. Its goroutine is wg's, and ends with ctx.
func (a *Agent) endWithSession(ctx context.Context, wg *sync.WaitGroup, gone <-chan struct{}, cancel context.CancelFunc) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-gone:
			// An agent that moves to its backup parent outlives the
			// parent that started it: its link's end decides.
			if !a.spec.Survive && !a.canSwitch() {
				cancel()
			}
		case <-ctx.Done():
		}
	}()
}

// goFunc runs f on a goroutine the agent owns: run joins it before it
// returns, so f must end with the agent's context.
func (a *Agent) goFunc(f func()) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f()
	}()
}
