package root

// The root's side of backup parents in action (docs/recovery.md, "Losing an
// agent"; the agents' side is launch/agent/reparent.go). The planner
// decides (recovery/nodeloss.go): which children of a lost agent are
// orphans on their way to new parents and which are lost with it, how long
// to wait for them, every change of the tree and the backups' redeal. The
// root carries it out: it closes and kills what is lost, tells each backup
// to switch its orphan at once (MSwitch), passes the backups' reports
// (MReparented) and its own adoptions to the planner (Reparented), gives
// the moved agents their routes, and sends the new backups.

import (
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// orphanWait bounds how long the root waits for a lost agent's children to
// reach their backup parents: the heartbeat's timeout (an orphan that
// missed the root's word sees its parent's link fall silent) and a second.
func (fe *frontend) orphanWait() time.Duration {
	return fe.opts.Timing.LinkTimeout(fe.opts.Heartbeat) + fe.opts.Timing.SlackOr()
}

// awaitOrphans carries out the planner's wait for a lost agent's orphans:
// each live backup is told to switch its orphan at once, and the planner
// hears when the wait is over.
func (fe *frontend) awaitOrphans(act recovery.AwaitOrphans) {
	for _, m := range act.Moves {
		if m.Switch {
			_ = fe.agents[m.Backup].send(proto.MSwitch, proto.EncodeInt(int64(m.Orphan)))
		}
	}
	fe.after(act.Wait, evPlanner{recovery.OrphansDue{Loss: act.Loss}})
}

// loseSubtree carries out the planner's LoseSubtree: the links of
// act.Closed are gone (the planner's), and the ranks of act.Abandoned,
// counted as ended by the planner, are recorded as ended with their
// agent. The agents of act.Lost are killed where the root can, with their
// ranks on this machine (the planner's Fence follows).
func (fe *frontend) loseSubtree(act recovery.LoseSubtree) {
	for _, r := range act.Abandoned {
		fe.journal.RankExited(journal.RankExit{Rank: r, Code: ExitLauncher, Reason: act.Reason()})
	}
	if act.NeverStarted != "" {
		return
	}
	for _, x := range act.Lost {
		b := fe.agents[x]
		for _, r := range b.ranks {
			if pid := fe.ledger().Pid(r); pid > 0 && b.local != nil { // pids are meaningful on this machine only
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
		b.end().Kill()
	}
}

// nodeLossAction carries out one of the planner's node-loss actions
// (recovery/nodeloss.go); it reports false for an action that is not one
// of them.
func (fe *frontend) nodeLossAction(act recovery.Action) bool {
	switch act := act.(type) {
	case recovery.LoseSubtree:
		fe.loseSubtree(act)
	case recovery.AwaitOrphans:
		fe.awaitOrphans(act)
	case recovery.OrphanLate, recovery.OrphansArrived, recovery.MoveIgnored: // told (narrate)
	case recovery.Redeal:
		fe.redealBackups(act)
	case recovery.Lost: // the planner's decisions on each agent follow
		if act.Running {
			fe.failedAt = time.Now()
		}
		for _, x := range act.Agents {
			b := fe.agents[x]
			fe.observe(AgentLost{Node: b.name, Inc: max(b.inc, 1), Silent: act.Silent && x == act.Agent})
		}
	case recovery.Moved:
		// Told (narrate); the state log's record of the tree says it too.
		change, _ := recovery.Narrate(act, fe.nameOf, time.Since)
		fe.moved(fe.agents[act.Agent], change)
	case recovery.MoveFailed:
		if c := fe.agents[act.Agent]; act.Undo && c.link != nil {
			c.link.Conn.Close() // the root's adoption of it: undone
		}
	default:
		return false
	}
	return true
}

// reparented takes a backup parent's report that it took an orphan as its
// child: the planner commits the new edge (moved carries it out).
func (fe *frontend) reparented(b *agentHandle, rp proto.Reparent) {
	if rp.Idx < 0 || rp.Idx >= len(fe.agents) || rp.Idx == b.idx {
		fe.protocolError(b, fmt.Errorf("reparent of agent %d", rp.Idx))
		return
	}
	fe.step(recovery.Reparented{Agent: rp.Idx, Parent: b.idx, Incarnation: rp.Inc})
}

// moved finishes the move of agent c to a new parent, in fe.topo already
// (change says what happened): the agents of its subtree are reached
// through their new top, and the state log records the tree; once that
// is committed (commitTree), and not before, the new ancestors get their
// routes and the moved agents report again (tellMoved). What the root
// sends them meanwhile waits with them (agentHandle.send).
func (fe *frontend) moved(c *agentHandle, change string) {
	moved, routes := fe.topo.MoveRoutes(c.idx)
	top := fe.agents[fe.topo.Top(c.idx)]
	parent := fe.parentName(c.idx)
	var seq uint64
	seq = fe.commitTree(change, func() {
		for _, x := range moved {
			fe.agents[x].route.Commit(seq) // its messages go out again (tellMoved flushes them)
		}
		fe.tellMoved(c, moved, routes, parent)
	})
	for _, x := range moved {
		fe.agents[x].via = top.link
		fe.agents[x].resynced = true
		fe.agents[x].route.Await(seq)
	}
}

// tellMoved tells the agents of a committed move (moved): c and the
// agents below it, moved, are now below its parent parent ("" for the
// root), and its ancestors learn routes to them, from the top down.
func (fe *frontend) tellMoved(c *agentHandle, moved []int, routes []topology.Route, parent string) {
	for _, r := range routes {
		_ = fe.agents[r.At].send(proto.MRoutes, proto.Routes{Via: r.Via, Agents: moved}.Encode())
	}
	fe.observe(Reparented{Node: c.name, Parent: parent})
	for _, x := range moved {
		_ = fe.agents[x].send(proto.MResyncReq, nil)
	}
	// An answer to a collective broadcast while the moved agents had no
	// parent is lost to them; the root's next broadcast may be a
	// recovery's Suspend, which abandons what they still wait for while
	// every other agent has moved on (make chaos, emulated, --restart rank,
	// an interior node crashed as the node table went out: its orphans'
	// ranks called Publish again against the others' next collective,
	// seed 8054055338655348347). So the latest answers go to them again,
	// oldest first, ahead of anything else: an agent takes one it waits
	// for and ignores one it had (launch/agent/coll.go).
	for _, res := range fe.colls.Answers() {
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MCollResult, res))
	}
	switch {
	case !fe.shutdownAt.IsZero():
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MShutdown, nil))
	case fe.terminating:
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MTerminate, proto.EncodeInt(int64(fe.opts.KillAfter))))
	}
	// What was sent to them while the move was being committed.
	for _, x := range moved {
		fe.agents[x].flush()
	}
}

// commitTree records the launch tree as it is now (change says what
// changed) and carries out tell, what the agents are told of the change,
// once the state log has committed it, not before, in the order of the
// changes (journal.TreeTells). It returns the change's number.
//
// A state log that cannot commit (its error ends with its close, as
// before) does not keep the agents from their routes: the change is told
// all the same, said with --verbose.
func (fe *frontend) commitTree(change string, tell func()) uint64 {
	fe.journalPlan(change)
	seq := fe.treeTells.Add(tell)
	fe.journal.Start()
	fe.goFunc(func() {
		err := fe.journal.Sync(fe.ctx)
		fe.put(evTreeCommitted{seq: seq, err: err})
	})
	return seq
}

// evTreeCommitted: the state log committed the tree changes up to seq
// (the journal commits in order), or could not (err).
type evTreeCommitted struct {
	seq uint64
	err error
}

func (evTreeCommitted) isRootEvent() {}

// treeCommitted tells the agents of every change committed up to
// ev.seq, in order.
func (fe *frontend) treeCommitted(ev evTreeCommitted) {
	if ev.err != nil {
		fe.verbosef("the tree's change could not be committed to the state log (%v): told all the same", ev.err)
	}
	fe.treeTells.Committed(ev.seq)
}

// adoptAsOrphan carries out the planner's Adopt of an orphan (an agent
// below a child of the root whose parent and backup parent are both lost:
// the root is the last of its fallback parents, sendFallbacks): c's link
// is the root's now, and the planner commits the new edge (Reparented).
func (fe *frontend) adoptAsOrphan(req launcher.AdoptRequest, c *agentHandle, inc uint64) {
	l, err := req.Accept()
	if err != nil {
		return
	}
	c.link = l
	fe.step(recovery.Adopted{Agent: c.idx})
	fe.startReader(c)
	if fe.replicas.Peers != nil {
		_ = c.link.Send(proto.MReplicas, fe.replicas.Encode())
	}
	fe.step(recovery.Reparented{Agent: c.idx, Parent: topology.Root, Incarnation: inc})
}

// redealBackups carries out the planner's Redeal: its change goes to the
// state log, and once that is committed (commitTree) the agents the
// planner names (recovery.Links.Redealt: their backup parent is new, or
// not the one they hold a link to) are told to open a standby link to it,
// or their fallbacks. A backup that is not up yet (started again) is sent
// when it is (agentUp).
func (fe *frontend) redealBackups(act recovery.Redeal) {
	fe.commitTree(act.Change(fe.nameOf), func() {
		for _, t := range fe.links().Redealt(act) {
			if t.Backup {
				fe.sendBackup(fe.agents[t.Agent])
			} else {
				fe.sendFallbacks(fe.agents[t.Agent])
			}
		}
	})
}

// refreshReplicaPeers tells the root's children where the replica agents
// are once a relaunched replica host's replica joined in a lost one's
// place (its address is new, its node may be a spare's).
func (fe *frontend) refreshReplicaPeers() {
	if fe.replicas.Peers == nil {
		return // not all up yet: agentUp sends the first list
	}
	ps := fe.replicaAddrs()
	if slices.Equal(ps, fe.replicas.Peers) {
		return
	}
	fe.replicas.Peers = ps
	fe.sendReplicas()
}

// replicaAddrs lists, by index, the replica agents that are up and where
// they listen.
func (fe *frontend) replicaAddrs() []proto.PeerAddr {
	var ps []proto.PeerAddr
	for i := range fe.replicaNodes {
		if b := fe.agents[i]; fe.link(b).Up && b.info.Addr != "" {
			ps = append(ps, proto.PeerAddr{Idx: i, Name: b.name, Addr: b.info.Addr})
		}
	}
	slices.SortFunc(ps, func(x, y proto.PeerAddr) int { return x.Idx - y.Idx })
	return ps
}

// sendReplicas tells every child of the root that is up where the replica
// agents are.
func (fe *frontend) sendReplicas() {
	for _, b := range fe.agents {
		if l := fe.link(b); fe.rootChild(b) && l.Up && !l.Closed {
			_ = b.send(proto.MReplicas, fe.replicas.Encode())
		}
	}
}

// expectReplica notes that agent a was given a root replica: the job's end
// waits for it to join (replicasSettled).
func (fe *frontend) expectReplica(a *agentHandle) {
	a.replica = true
	fe.journal.Expect(a.name)
}
