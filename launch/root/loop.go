package root

// The root's event loop: agents' messages, link ends, collectives merged at
// the root, stdin, and the job's end.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// loop is the front-end's event loop: it owns all job state.
func (fe *frontend) loop(ctx context.Context, events <-chan event) int {
	var timeout <-chan time.Time
	if fe.opts.Timeout > 0 {
		t := time.NewTimer(fe.opts.Timeout - time.Since(fe.start))
		defer t.Stop()
		timeout = t.C
	}
	if fe.stdinAgent != nil && fe.opts.Stdin != nil {
		fe.input = output.NewStdin(fe.opts.Stdin)
		stop, _ := fe.input.Start(ctx, func(ctx context.Context, c output.Chunk) bool {
			select {
			case fe.events <- evStdin{c}:
				return true
			case <-ctx.Done():
				return false // stopped: it goes nowhere
			}
		})
		defer stop()
	}
	var shutdownTimer, settle <-chan time.Time
	liveTick := time.NewTicker(journal.LiveEvery)
	defer liveTick.Stop()
	standTick := time.NewTicker(journal.StandingPoll)
	defer standTick.Stop()
	for !fe.links().AllGone() {
		select {
		case ev := <-events:
			if !fe.hold(ev) {
				fe.handle(ev)
			}
		case <-standTick.C:
			fe.checkStanding()
		case <-liveTick.C:
			if !fe.deposed() {
				fe.writeLive()
			}
		case <-settle:
		case sig := <-fe.opts.Signals:
			if out, ok := fe.stops.Forward(sig); ok {
				fe.onSignal(out)
			} else {
				fe.verbosef("not forwarding %v: it ends a stop of the front-end itself; the ranks were not stopped", sig)
			}
		case <-timeout:
			fe.sayOpenCollectives()
			fe.step(recovery.TimedOut{Limit: fe.opts.Timeout})
		case <-shutdownTimer:
			fe.warnf("agents did not exit after the job ended; killing them")
			fe.killAgents()
			shutdownTimer = nil
		case <-ctx.Done():
			fe.killAgents()
			return ExitLauncher
		case <-fe.opts.Vanish:
			fe.vanish()
			return ExitLauncher
		}
		if fe.journal.Aside() != nil {
			return ExitLauncher // run follows the job under its new root
		}
		if fe.ledger().EndedCount() == fe.opts.N && fe.shutdownAt.IsZero() {
			if fe.endedAt.IsZero() {
				fe.verbosef("every rank ended")
			}
			if !fe.replicasSettled() {
				settle = time.After(50 * time.Millisecond) // look again
				continue
			}
			if fe.opts.AtEnd != nil {
				fe.goFunc(fe.opts.AtEnd)
			}
			// The job's end is committed while every replica still runs;
			// with no replica agent (--replicas 1, no successor's group),
			// while the agents exit.
			closed := fe.beginCloseJournal()
			if max(fe.opts.Replicas, 1) > 1 || len(fe.replicaNodes) > 0 || fe.journal.Replica() != nil {
				closed()
			}
			fe.shutdown()
			fe.verbosef("agents told to exit")
			fe.observe(RanksEnded{})
			shutdownTimer = time.After(agentsExitWait)
		}
	}
	fe.verbosef("every agent's link ended")
	// A lost agent's node is fenced before the job's end is reported.
	fe.fences.Wait()
	fe.closeJournal()
	fe.journal.End()
	ends := make([]launcher.AgentEnd, len(fe.agents))
	for i, a := range fe.agents {
		ends[i] = a.end()
		ends[i].Finished = fe.link(a).Done
	}
	launcher.ReapAgents(ends, 2*time.Second) // a lost agent's session gets 2 s
	return fe.finish()
}

// agentsExitWait bounds how long the agents get to exit once told the job
// is over (a replica agent first waits up to 2 s for the final status).
const agentsExitWait = 5 * time.Second

// replicasSettled reports whether the job's end can be committed: every
// replica agent that is up joined the group or failed to, or the group
// has not formed, or 10 s passed (journal.Group.EndReady).
func (fe *frontend) replicasSettled() bool {
	if fe.endedAt.IsZero() {
		fe.endedAt = time.Now()
	}
	var up []string
	for i := range fe.replicaNodes {
		if a, l := fe.agents[i], fe.links().Link(i); a.replica && !l.Closed && !l.Done {
			up = append(up, a.name)
		}
	}
	ready, late := fe.journal.EndReady(up, fe.endedAt)
	if late {
		fe.warnf("job state log: root replicas still joining the group after 10 s; committing the final status without them")
	}
	return ready
}

func (fe *frontend) shutdown() {
	fe.step(recovery.Finished{})
	// The replicas named wait for the final status before they exit: else
	// a follower a heartbeat behind the leader keeps a log without the end.
	fe.bcast(proto.MShutdown, proto.EncodeStrings(fe.journal.Joined()))
	fe.shutdownAt = time.Now()
	if fe.cancelLaunch != nil {
		fe.cancelLaunch()
	}
}

// bcast sends a message to every agent through the root's children
// (launcher.Bcast).
func (fe *frontend) bcast(typ uint8, p []byte) int64 {
	var cs []launcher.Child
	for _, a := range fe.agents {
		if l := fe.link(a); fe.rootChild(a) && a.link != nil && !l.Closed && !l.Done {
			cs = append(cs, launcher.Child{Idx: a.idx, Link: a.link, Route: &a.route})
		}
	}
	return launcher.Bcast(cs, typ, p)
}

// linkEnded handles the end of an agent's link (told by the link itself,
// or by its parent agent): it and the agents below it are gone.
func (fe *frontend) linkEnded(a *agentHandle, err error) {
	if fe.link(a).Closed {
		return
	}
	// The planner decides who is lost with it and who moves; the self-fence
	// bound counts from its node's last word (Quiet).
	ll := recovery.LinkLost{Agent: a.idx, Err: err.Error(), Silent: errors.Is(err, proto.ErrHeartbeat), At: time.Now(), Direct: a.link != nil}
	if a.link != nil {
		ll.Quiet = a.link.Quiet()
	}
	fe.step(ll)
	fe.ringRecallsCheck() // the agents lost will not answer a recall (ring.go)
}

func (fe *frontend) handle(ev event) {
	switch ev := ev.(type) {
	case evMessage:
		if ev.agent == fe.agents[ev.agent.idx] { // else from an incarnation lost and replaced
			fe.message(ev.agent, ev.typ, ev.p)
		}
	case evLinkEnd:
		if ev.agent == fe.agents[ev.agent.idx] {
			fe.linkEnded(ev.agent, ev.err)
		}
	case evLaunched:
		r := ev.res
		a := fe.agents[r.Child.Idx]
		if r.Err != nil {
			fe.step(recovery.LaunchFailed{Agent: a.idx, Node: a.name, Msg: r.Err.Error()})
			return
		}
		a.link, a.sess = r.Link, r.Sess
		fe.startReader(a)
		fe.agentUp(a, r.Up)
	case evReplicaDone:
		fe.journal.Settle(ev.name, ev.joined)
		fe.refreshReplicaPeers()
		if ev.joined {
			fe.observe(ReplicaJoined{Node: ev.name})
			fe.writeLive() // its readers wait for the group (tests, status)
		}
	case evPeerGone:
		fe.peerGone(ev)
	case evGossip:
		fe.gossiped(ev.ev)
	case evGossipCheck:
		if ev.a == fe.agents[ev.a.idx] && ev.a.link != nil {
			fe.step(fe.gossipDead(ev.a, ev.a.inc, true))
		}
	case evStdin: // sent once rank 0's agent is up (flushStdin)
		fe.input.Queue(ev.c)
		fe.flushStdin()
	case evAdopt:
		if ev.req.Hello.Control {
			fe.control(ev.req.Conn)
			break
		}
		fe.adopt(ev.req)
	case evControl:
		fe.controlRequest(ev)
	case evAdoptTimeout:
		fe.adoptTimedOut()
	case evResume:
		fe.resumeLaunch()
	case evCommitted:
		fe.committed(ev)
	case evRelaunched:
		fe.relaunched(ev)
	case evPlanner:
		fe.step(ev.ev)
	case evTreeCommitted:
		fe.treeCommitted(ev)
	default:
		panic(fmt.Sprintf("launch: root event %T not handled", ev))
	}
}

// message handles one message of agent a, decoded and checked by
// proto.DecodeUp.
func (fe *frontend) message(a *agentHandle, typ uint8, p []byte) {
	m, err := proto.DecodeUp(a.idx, typ, p, proto.Bounds{Ranks: fe.opts.N, Agents: len(fe.agents)})
	if err != nil {
		fe.protocolError(a, err)
		return
	}
	switch m := m.(type) {
	case proto.RecAck:
		fe.recoveryAck(a, m) // recovery.go
	// The tree: relays, children, backups, replicas.
	case proto.Relayed:
		// One on a path its sender left, or from a lost agent, is dropped:
		// what matters comes again.
		if fe.topo.Top(m.From) == a.idx && !fe.links().Link(m.From).Closed {
			fe.message(fe.agents[m.From], m.Type, m.P)
		}
	case proto.Reparent:
		fe.reparented(a, m)
	case proto.ChildUp:
		if slices.Contains(fe.topo.Children(a.idx), m.Idx) { // else a child that moved away since
			fe.agentUp(fe.agents[m.Idx], m)
		}
	case proto.ChildReport:
		fe.childReport(a, m)
	case proto.BackupUp:
		fe.step(recovery.BackupUp{Agent: a.idx, Backup: m.Backup})
	case proto.ReplicaUp:
		fe.replicaUp(a, m)
	case proto.AgentDone:
		fe.step(recovery.AgentDone{Agent: a.idx})
		if m.StatsOK && m.Stats.PMI.Requests > 0 {
			fe.verbosef("node %s: %s", a.name, m.Stats.Words())
		}
	// The ranks: started, ended, aborted.
	case proto.Started:
		fe.ranksStarted(a, m)
	case proto.RankStatus:
		fe.rankExit(a, m)
	case proto.AbortMsg:
		if m.Stranded {
			fe.journal.Stranded(journal.Stranded{Node: fe.nodeOf(m.Rank), Rank: m.Rank})
		}
		fe.step(recovery.RankAborted{Rank: m.Rank, Node: fe.nodeOf(m.Rank), Code: m.Code, Msg: m.Msg, Failed: m.Failed})
	// Output and stdin.
	case proto.Output:
		if a.outNext.Take(m.Seq) { // else a copy, or sent again after a failover (launch/proto/outq.go)
			fe.out.Push(output.Item{Agent: a, Seq: m.Seq, Rank: m.Rank, Stream: m.Stream, Data: m.Data})
		}
	case proto.OutputResync:
		a.outNext.Resync(m.First)
	case proto.StdinAck:
		if fe.input != nil {
			fe.input.Acked()
		}
	// Collectives.
	case *proto.Contrib:
		fe.contribute(a, m)
	case proto.RingAsk:
		fe.ringAsk(a, m)
	case proto.RingValues:
		fe.ringValues(a, m.CollResult)
	case proto.TableHeld:
		// A successor whose replicated state lacks the published table.
		if fe.table == nil {
			fe.tablePublished(m.Values)
		}
	}
}

// childReport takes a parent's report of its child (not started, or its
// link ended), unless the child moved away.
func (fe *frontend) childReport(parent *agentHandle, cr proto.ChildReport) {
	if !slices.Contains(fe.topo.Children(parent.idx), cr.Idx) {
		return
	}
	if c := fe.agents[cr.Idx]; cr.Gone {
		fe.linkEnded(c, cr.Err())
	} else {
		fe.step(recovery.LaunchFailed{Agent: c.idx, Node: c.name, Msg: cr.Msg})
	}
}

// replicaUp takes a replica agent's word that its replica is ready to
// join the group, or could not start (no address).
func (fe *frontend) replicaUp(a *agentHandle, ru proto.ReplicaUp) {
	if !fe.replicaNodes[a.idx] || ru.Name != a.name {
		fe.protocolError(a, fmt.Errorf("replica up for %q: not this node's replica", ru.Name))
		return
	}
	if ru.Addr == "" {
		fe.warnf("root replica on %s did not start; the state log has one replica less", ru.Name)
		fe.journal.Settle(ru.Name, false)
		return
	}
	fe.addReplica(ru, a.replaces)
}

// rankExit takes a rank's end: an older incarnation's is stale; one
// reported again after a failover is taken once.
func (fe *frontend) rankExit(a *agentHandle, st proto.RankStatus) {
	if st.Incarnation != 0 && st.Incarnation < fe.ledger().Runs(st.Rank) {
		return
	}
	if fe.ledger().Ended(st.Rank) { // ranks abandoned with a lost agent too
		if !fe.status().Resumed && !a.resynced {
			fe.protocolError(a, fmt.Errorf("exit message for rank %d: it had ended", st.Rank))
		}
		return
	}
	fe.rankEnded(st)
}

// ranksStarted takes an agent's ranks that run (the planner says which
// started again: recovery.RanksRunning) and records them.
func (fe *frontend) ranksStarted(a *agentHandle, st proto.Started) {
	for _, r := range st.Ranks {
		if r >= 0 && r < fe.opts.N && fe.ledger().Agent(r) < 0 {
			a.ranks = append(a.ranks, r) // a successor learns where it runs
		}
	}
	for _, act := range fe.decide(recovery.RanksStarted{Agent: a.idx, Ranks: st.Ranks, Pids: st.Pids, Incs: st.Incs}) {
		run, ok := act.(recovery.RanksRunning)
		switch {
		case !ok:
			fe.carryOut([]recovery.Action{act})
		case run.Again:
			fe.journal.RanksRestarted(a.name, run.Ranks, run.Pids, run.Incs)
			fe.verbosef("node %s: rank(s) %s started again", a.name, recovery.RanksText(run.Ranks))
		default:
			for i, cpus := range st.CPUs {
				fe.verbosef("rank %d on %s bound to CPUs %s (--bind-to %s)", st.Ranks[i], a.name, cpus, fe.opts.Bind)
			}
			a.ranksAt = time.Since(fe.start)
			if fe.ledger().StartedCount() >= fe.opts.N && fe.releaseTimer == nil {
				fe.releaseTimer = time.AfterFunc(250*time.Millisecond, fe.journal.Start)
			}
			fe.journal.RanksStarted(a.name, run.Ranks, run.Pids)
			fe.showProgress()
			fe.verbosef("node %s: %d rank(s) running", a.name, len(st.Ranks))
		}
	}
}

// contribute merges a subtree's contribution (proto.Gather); once every
// agent is covered, the result goes down to every node.
func (fe *frontend) contribute(a *agentHandle, c *proto.Contrib) {
	top := a.idx
	if fe.topo != nil {
		top = fe.topo.Top(a.idx)
	}
	g := fe.colls.Add(a.idx, top, c, len(fe.agents), fe.liveN)
	switch {
	case g.Mismatch:
		fe.step(recovery.CollectiveMismatch{Seq: c.Seq, Node: a.name, Op: c.Op.String(), Want: g.Want.String()})
		return
	case g.Waits:
		fe.observe(CollectiveWaits{Kind: proto.CollKind(c.Op), Seq: c.Seq & (1<<32 - 1), Covered: g.Covered})
		fe.checkStranded()
		return
	case g.Answer == nil:
		return
	}
	var down int64
	if c.Op == rankproto.OpRing {
		down = fe.ringAnswer(c.Seq, g) // ring.go
	} else {
		down = fe.bcast(proto.MCollResult, g.Encoded)
	}
	fe.collStats.Add(c.Op, g, down)
	fe.verbosef("%s #%d: root received %d message(s) covering %d agent(s), sent down %d byte(s)",
		proto.CollKind(c.Op), c.Seq&(1<<32-1), g.Msgs, g.Covered, down)
	fe.journal.Start()
	if c.Op == rankproto.OpPublish && fe.nodeTableAt == 0 {
		fe.tablePublished(g.Answer.Values)
		fe.verbosef("node table of %d ranks published", fe.opts.N)
	}
}

// tablePublished takes the first node table as published (the ranks'
// first Publish, or the table the agents hold: MTableHeld) to the planner,
// the observers and the state log.
func (fe *frontend) tablePublished(values [][]byte) {
	fe.table = slices.Clone(values) // patched in place later; the journal keeps values
	fe.step(recovery.TablePublished{})
	fe.observe(TablePublished{N: fe.opts.N})
	fe.nodeTableAt = time.Since(fe.start)
	if fe.hooks.breakAt == "no-table-record" {
		fe.warnf("test hook: the node table is not recorded in the state log (%s)", breakEnv)
		return
	}
	nodes := make([]string, fe.opts.N)
	for r := range nodes {
		nodes[r] = fe.nodeOf(r)
	}
	fe.journal.NodeTable(nodes, values)
}

// flushStdin sends the stdin chunks that wait, if rank 0's agent is up.
func (fe *frontend) flushStdin() {
	a := fe.stdinAgent
	if a == nil || !fe.link(a).Up || a.specAt == 0 || fe.input == nil {
		return // not up, or its job not sent yet (agentUp flushes then)
	}
	fe.input.Flush(a.send)
}

// AckOutput acknowledges the agent's output frames up to seq: the output
// writer wrote them (output.Source).
func (a *agentHandle) AckOutput(seq uint64) {
	_ = a.send(proto.MOutputAck, proto.EncodeInt(int64(seq)))
}

func (fe *frontend) killAgents() {
	for _, a := range fe.agents {
		// A child told to shut down kills its ranks and exits quietly, where
		// a killed one would report a lost link.
		if fe.rootChild(a) && a.link != nil && !fe.link(a).Closed && a.link.Send(proto.MBcast, proto.Wrap(-1, proto.MShutdown, nil)) == nil && a.local == nil {
			continue // a remote agent: closing its session now would race the shutdown
		}
		a.end().Kill()
	}
	for _, pid := range fe.ledger().Running(func(n int) bool { return fe.agents[n].local != nil }) {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// finish prints the failure summary and returns the exit code.
func (fe *frontend) finish() int {
	if fe.plan != nil {
		fe.verbosef("launch tree: %s of depth %d over %d agent(s); %s", fe.plan.Kind, fe.plan.Depth(), len(fe.agents), fe.links().StandbyWords(fe.agentNames()))
	}
	if cs := fe.collStats; cs.Answered > 0 {
		fe.verbosef("collectives: %s", cs.Words())
	}
	var ru syscall.Rusage // with --test-nodes, not the agents': processes of their own
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		user, sys := time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
		fe.verbosef("root: %.1f ms of CPU time (%.1f ms user, %.1f ms system)", ms(user+sys), ms(user), ms(sys))
	}
	fe.verbosef("job ended")
	failure := fe.status().Failure
	if failure == nil {
		return 0
	}
	if words := recovery.FailedRanks(fe.ledger().Failed(fe.nodeOf)); words != "" {
		fe.out.Message(words)
	}
	return failure.Code
}

// sayOpenCollectives tells which collectives are open at --timeout and
// which agents they wait for.
func (fe *frontend) sayOpenCollectives() {
	for _, o := range fe.colls.Open(fe.agentNames()) {
		fe.observe(OpenAtTimeout{Kind: o.Kind, Seq: o.Seq, Missing: slices.Clone(o.Missing)})
		fe.verbosef("%s", o.Words())
	}
}
