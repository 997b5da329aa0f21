package root

// The root's side of backup parents (docs/recovery.md, "Losing an agent";
// the agents' side: launch/agent/reparent.go). The planner decides
// (recovery/nodeloss.go); the root kills what is lost, tells backups to
// switch, passes their reports on, and routes and redeals the moved agents.

import (
	"fmt"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// loseSubtree records the ranks the planner abandoned as ended and kills the
// lost agents where the root can, with their ranks on this machine (the
// planner's Fence follows).
func (fe *frontend) loseSubtree(act recovery.LoseSubtree) {
	for _, r := range act.Abandoned {
		fe.journal.RankExited(journal.RankExit{Rank: r, Code: ExitLauncher, Reason: act.Reason()})
	}
	if act.NeverStarted != "" {
		return
	}
	for _, x := range act.Lost {
		b := fe.agents[x]
		b.end().KillWithRanks(fe.ledger().Pids(b.ranks))
	}
}

// nodeLossAction carries out one of the planner's node-loss actions
// (recovery/nodeloss.go); false for any other action.
func (fe *frontend) nodeLossAction(act recovery.Action) bool {
	switch act := act.(type) {
	case recovery.LoseSubtree:
		fe.loseSubtree(act)
	case recovery.AwaitOrphans: // each live backup switches its orphan at once
		for _, m := range act.Moves {
			if m.Switch {
				_ = fe.agents[m.Backup].send(proto.MSwitch, proto.EncodeInt(int64(m.Orphan)))
			}
		}
		fe.after(act.Wait, evPlanner{recovery.OrphansDue{Loss: act.Loss}})
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
	case recovery.Moved: // told (narrate), and the tree's record says it
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

// reparented passes a backup parent's report that it took an orphan on to
// the planner.
func (fe *frontend) reparented(b *agentHandle, rp proto.Reparent) {
	if rp.Idx < 0 || rp.Idx >= len(fe.agents) || rp.Idx == b.idx {
		fe.protocolError(b, fmt.Errorf("reparent of agent %d", rp.Idx))
		return
	}
	fe.step(recovery.Reparented{Agent: rp.Idx, Parent: b.idx, Incarnation: rp.Inc})
}

// moved finishes the move of agent c to a new parent, in fe.topo already:
// its subtree is reached through its new top, and the new ancestors get
// their routes only once the tree's record is committed (commitTree); what
// the root sends the moved agents meanwhile is held (agentHandle.send).
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

// tellMoved tells the agents of a committed move: the ancestors their
// routes, from the top down, and the moved agents to report again.
func (fe *frontend) tellMoved(c *agentHandle, moved []int, routes []topology.Route, parent string) {
	for _, r := range routes {
		_ = fe.agents[r.At].send(proto.MRoutes, proto.Routes{Via: r.Via, Agents: moved}.Encode())
	}
	fe.observe(Reparented{Node: c.name, Parent: parent})
	for _, x := range moved {
		_ = fe.agents[x].send(proto.MResyncReq, nil)
	}
	// Answers broadcast while they had no parent are lost to them (a Suspend
	// next would abandon them): the latest go again (launch/agent/coll.go).
	for _, res := range fe.colls.Answers() {
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MCollResult, res))
	}
	if w := fe.lateWord(); w != nil {
		_ = c.send(proto.MBcast, w)
	}
	for _, x := range moved {
		fe.agents[x].flush()
	}
}

// lateWord is the broadcast an agent that joins the root late (moved to
// it, or adopted by a successor) missed about the job's end: the
// shutdown, or the terminate; nil while the job runs.
func (fe *frontend) lateWord() []byte {
	switch {
	case !fe.shutdownAt.IsZero():
		return proto.Wrap(-1, proto.MShutdown, nil)
	case fe.terminating:
		return proto.Wrap(-1, proto.MTerminate, proto.EncodeInt(int64(fe.opts.KillAfter)))
	}
	return nil
}

// commitTree records the launch tree (change says what changed) and runs
// tell once the state log committed it, in the order of the changes
// (journal.TreeTells, treeCommitted); it returns the change's number.
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

// evTreeCommitted: the tree changes up to seq are committed (or not: err).
type evTreeCommitted struct {
	seq uint64
	err error
}

func (evTreeCommitted) isRootEvent() {}

// treeCommitted tells the agents of every change up to ev.seq, in order; a
// state log that cannot commit does not keep the agents from their routes.
func (fe *frontend) treeCommitted(ev evTreeCommitted) {
	if ev.err != nil {
		fe.verbosef("the tree's change could not be committed to the state log (%v): told all the same", ev.err)
	}
	fe.treeTells.Committed(ev.seq)
}

// adoptAsOrphan carries out the planner's Adopt of an orphan whose parent
// and backup are both lost (the root is its last fallback).
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

// redealBackups carries out the planner's Redeal: once the change is
// committed, the agents recovery.Links.Redealt names are told their backup
// or their fallbacks (a backup not up yet is sent by agentUp).
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
// are once a relaunched host's replica joined (its address is new).
func (fe *frontend) refreshReplicaPeers() {
	if fe.replicas.Refresh(fe.replicaAddrs()) { // agentUp sends the first list
		fe.sendReplicas()
	}
}

// replicaAddrs lists, by index, the replica agents that are up and where
// they listen.
func (fe *frontend) replicaAddrs() []proto.PeerAddr {
	return launcher.ReplicaPeers(fe.replicaNodes, func(i int) (string, string) {
		if b := fe.agents[i]; fe.link(b).Up {
			return b.name, b.info.Addr
		}
		return "", ""
	})
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

// expectReplica notes that agent a hosts a root replica: the job's end
// waits for it to join.
func (fe *frontend) expectReplica(a *agentHandle) {
	a.replica = true
	fe.journal.Expect(a.name)
}
