package root

// The root's side of backup parents in action (docs/recovery.md, "Losing an
// agent"; the agents' side is launch/agent/reparent.go). When an
// agent with agents below it is lost under a restart policy, its children
// that hold a standby link to a live backup parent are not lost with it:
// they are orphans, on their way to that parent. The root tells each
// backup to switch its orphan at once (MSwitch: a silent parent's link
// times out later than the root's detection), takes each new edge the
// backups report (MReparented), and hands the loss to the planner once
// every orphan arrived or orphanWait passed; an orphan that did not
// arrive is lost too. Lost agents start again as children of the root.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// orphanWait bounds how long the root waits for a lost agent's children to
// reach their backup parents: the heartbeat's timeout (an orphan that
// missed the root's word sees its parent's link fall silent) and a second.
func (fe *frontend) orphanWait() time.Duration {
	return fe.opts.Timing.LinkTimeout(fe.opts.Heartbeat) + fe.opts.Timing.SlackOr()
}

// loss is the loss of an agent whose children are moving to their backup
// parents: the planner hears of it once they arrived.
type loss struct {
	a       *agentHandle
	err     error
	silent  bool
	lost    []*agentHandle // a and the agents lost with it
	orphans map[int]bool   // a's children on their way to their backup parents
	at      time.Time
}

// evOrphansDue: the time for a loss's orphans to arrive passed.
type evOrphansDue struct{ l *loss }

func (evOrphansDue) isRootEvent() {}

// orphansOf lists a lost agent's children that can move to their backup
// parents: up, with a live backup outside a's subtree, in a job that
// recovers from lost agents.
func (fe *frontend) orphansOf(a *agentHandle) map[int]bool {
	if !fe.tree || fe.opts.Restart == recovery.None || fe.rec.Ending() || a.done {
		return nil
	}
	var out map[int]bool
	for _, c := range fe.topo.Children(a.idx) {
		ca := fe.agents[c]
		if !ca.up || ca.closed || ca.done {
			continue
		}
		if !fe.canParent(fe.topo.Backup(c), a) && !slices.ContainsFunc(ca.fallbacks, func(p proto.PeerAddr) bool {
			return p.Idx < 0 || fe.canParent(p.Idx, a)
		}) {
			continue
		}
		if out == nil {
			out = map[int]bool{}
		}
		out[c] = true
	}
	return out
}

// canParent reports whether agent b can take an orphan of lost agent a:
// it is up, outside a's subtree, and not an orphan itself.
func (fe *frontend) canParent(b int, a *agentHandle) bool {
	if b < 0 || b >= len(fe.agents) || fe.topo.InSubtree(b, a.idx) || fe.orphaned(b) {
		return false
	}
	ba := fe.agents[b]
	return ba.up && !ba.closed && !ba.done
}

// fallbackWait is how much longer than orphanWait the root waits for an
// orphan whose backup parent is lost too: it tries its fallback parents,
// each connection bounded by two seconds (launch/agent/reparent.go).
const fallbackWait = 4 * time.Second

// orphaned reports whether agent x is an orphan of a loss under way, or
// below one.
func (fe *frontend) orphaned(x int) bool {
	return slices.ContainsFunc(fe.losses, func(l *loss) bool { return kept(fe.topo, x, l.orphans) })
}

// lossPending reports whether agent b was lost in a loss the planner has
// not heard of yet (its orphans are on their way): its ranks' end is not
// final.
func (fe *frontend) lossPending(b *agentHandle) bool {
	for _, l := range fe.losses {
		if slices.Contains(l.lost, b) {
			return true
		}
	}
	return false
}

// awaitOrphans holds the loss of agent a until its orphans reached their
// backup parents.
func (fe *frontend) awaitOrphans(l *loss) {
	fe.losses = append(fe.losses, l)
	names := make([]string, 0, len(l.orphans))
	wait := fe.orphanWait()
	for _, c := range slices.Sorted(maps.Keys(l.orphans)) {
		bi := fe.topo.Backup(c)
		if !fe.canParent(bi, l.a) {
			names = append(names, fmt.Sprintf("%s to a fallback parent (its backup is lost too)", fe.agents[c].name))
			wait = fe.orphanWait() + fallbackWait
		} else {
			names = append(names, fmt.Sprintf("%s to %s", fe.agents[c].name, fe.agents[bi].name))
		}
		if bi >= 0 && !fe.topo.InSubtree(bi, l.a.idx) {
			if b := fe.agents[bi]; b.up && !b.closed {
				// Even one that will refuse it passes the word on.
				_ = b.send(proto.MSwitch, proto.EncodeInt(int64(c)))
			}
		}
	}
	fe.verbosef("recovery: node %s was lost with agents below it; moving them to new parents: %s", l.a.name, strings.Join(names, ", "))
	fe.after(wait, evOrphansDue{l: l})
}

// orphansDue gives up on the orphans of l that did not arrive: they are
// lost with its agent.
func (fe *frontend) orphansDue(l *loss) {
	if !slices.Contains(fe.losses, l) {
		return
	}
	for _, c := range slices.Sorted(maps.Keys(l.orphans)) {
		fe.warnf("node %s did not reach a new parent in time after the loss of node %s: lost with it", fe.agents[c].name, l.a.name)
		l.lost = append(l.lost, fe.loseSubtree(fe.agents[c], nil)...)
	}
	clear(l.orphans)
	fe.finishLoss(l)
}

// loseSubtree closes agent a and the agents below it but for those in
// keep and below them; it returns those lost now, their ranks counted as
// lost with them (not ended by the termination that may follow).
func (fe *frontend) loseSubtree(a *agentHandle, keep map[int]bool) []*agentHandle {
	var lost []*agentHandle
	for _, b := range fe.closeSubtree(a, keep) {
		if !b.done {
			fe.abandonRanks(b, "lost with its agent")
			b.kill()
			fe.fenceAgent(b)
			lost = append(lost, b)
		}
	}
	return lost
}

// finishLoss hands a loss to the planner: the lost agents become children
// of the root (the root starts them again), the others keep the parents
// they have now, and backups are dealt again.
func (fe *frontend) finishLoss(l *loss) {
	fe.losses = slices.DeleteFunc(fe.losses, func(x *loss) bool { return x == l })
	if fe.tree && fe.opts.Restart != recovery.None && !fe.rec.Ending() {
		for _, b := range l.lost {
			if fe.topo.Parent(b.idx) != topology.Root {
				if err := fe.topo.Reparent(b.idx, topology.Root); err == nil {
					b.rootChild = true
				}
			}
		}
		var ns []string
		for _, b := range l.lost {
			ns = append(ns, b.name)
		}
		fe.redealBackups(fmt.Sprintf("lost node(s) %s start again as children of the root; backup parents dealt again", strings.Join(ns, ", ")))
	}
	fe.lostAgents(l.a, l.lost, l.err, l.silent)
}

// reparented takes a backup parent's report that it took an orphan as its
// child: the root commits the new edge, gives the new ancestors their
// routes, and asks the moved agents to report again.
func (fe *frontend) reparented(b *agentHandle, rp proto.Reparent) {
	if rp.Idx < 0 || rp.Idx >= len(fe.agents) || rp.Idx == b.idx {
		fe.protocolError(b, fmt.Errorf("reparent of agent %d", rp.Idx))
		return
	}
	c := fe.agents[rp.Idx]
	if c.closed || rp.Inc != max(c.inc, 1) {
		// Declared lost already (its old parent's report came first):
		// the fence of its node ends it.
		fe.verbosef("recovery: node %s (incarnation %d) reached its backup parent %s after it was declared lost: ignored", c.name, rp.Inc, b.name)
		return
	}
	old := fe.topo.Parent(c.idx)
	what := "its backup parent"
	if fe.topo.Backup(c.idx) != b.idx {
		what = "its fallback parent" // its backup was lost too
	}
	if old != b.idx {
		if err := fe.topo.Reparent(c.idx, b.idx); err != nil {
			fe.warnf("node %s cannot move under %s: %v", c.name, b.name, err)
			return
		}
	}
	oldName := "the root"
	if old >= 0 {
		oldName = "node " + fe.agents[old].name
	}
	fe.moved(c, fmt.Sprintf("node %s moved to %s %s (%s was lost)", c.name, what, b.name, oldName))
}

// moved finishes the move of agent c to a new parent, in fe.topo already
// (change says what happened): the agents of its subtree are reached
// through their new top, the new ancestors get their routes, the state
// log the tree, and the moved agents report again.
func (fe *frontend) moved(c *agentHandle, change string) {
	moved := append([]int{c.idx}, fe.topo.Subtree(c.idx)...)
	top := fe.agents[fe.topo.Top(c.idx)]
	for _, x := range moved {
		fe.agents[x].via = top.link
		fe.agents[x].rootChild = fe.topo.Parent(x) == topology.Root
		fe.agents[x].resynced = true
	}
	// Routes, from the top down: each message for an agent below travels
	// through ancestors that know the way already.
	anc := fe.topo.Ancestors(c.idx)
	for i := len(anc) - 1; i >= 0; i-- {
		via := c.idx
		if i > 0 {
			via = anc[i-1]
		}
		_ = fe.agents[anc[i]].send(proto.MRoutes, proto.Routes{Via: via, Agents: moved}.Encode())
	}
	fe.warnf("%s", change)
	fe.observe(Reparented{Node: c.name, Parent: fe.parentName(c.idx)})
	fe.journalPlan(change)
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
	for _, seq := range slices.Sorted(maps.Keys(fe.results)) {
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MCollResult, fe.results[seq]))
	}
	switch {
	case !fe.shutdownAt.IsZero():
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MShutdown, nil))
	case fe.terminating:
		_ = c.send(proto.MBcast, proto.Wrap(-1, proto.MTerminate, proto.EncodeInt(int64(fe.opts.KillAfter))))
	}
	for _, l := range fe.losses {
		if l.orphans[c.idx] {
			delete(l.orphans, c.idx)
			if len(l.orphans) == 0 {
				fe.verbosef("recovery: every agent below node %s reached a new parent in %v", l.a.name, time.Since(l.at).Round(time.Millisecond))
				fe.finishLoss(l)
			}
			break
		}
	}
}

// adoptOrphan takes agent c, below a child of the root, as a child of the
// root: its parent and its backup parent are both lost, and the root is
// the last of its fallback parents (sendFallbacks).
func (fe *frontend) adoptOrphan(ac *adoptConn, c *agentHandle) {
	inc := max(ac.hello.Inc, 1)
	refuse := func(why string) {
		ac.refuse(fe, c)
		fe.verbosef("recovery: refused to adopt node %s (incarnation %d): %s", c.name, inc, why)
	}
	switch {
	case !fe.tree || fe.opts.Restart == recovery.None:
		refuse("the job does not recover from lost agents")
		return
	case c.closed || inc != max(c.inc, 1):
		refuse("it was declared lost")
		return
	case !c.up:
		refuse("it is not up")
		return
	case fe.rec.Ending():
		refuse("the job is ending")
		return
	}
	if err := wire.WriteFrame(ac.conn, proto.MAdopted, nil); err != nil {
		ac.conn.Close()
		return
	}
	old := fe.topo.Parent(c.idx)
	if err := fe.topo.Reparent(c.idx, topology.Root); err != nil {
		ac.conn.Close()
		fe.warnf("node %s cannot move under the root: %v", c.name, err)
		return
	}
	c.link = proto.NewLink(ac.conn)
	c.adopted = true
	fe.startReader(fe.ctx, c, fe.events)
	if fe.replicaPeers != nil {
		_ = c.link.Send(proto.MReplicas, fe.replicasMsg())
	}
	oldName := "the root"
	if old >= 0 {
		oldName = "node " + fe.agents[old].name
	}
	fe.moved(c, fmt.Sprintf("node %s moved to the root, its last fallback parent (%s and its backup parent were lost)", c.name, oldName))
}

// redealBackups gives agents new backup parents after the tree changed
// (what says why), and tells those whose backup is new, or not the one
// they hold a link to, to open a standby link to it. A backup that is
// not up yet (started again) is sent when it is (agentUp).
func (fe *frontend) redealBackups(why string) {
	before := make([]int, len(fe.agents))
	for i := range fe.agents {
		before[i] = fe.topo.Backup(i)
	}
	fe.topo.RecomputeBackups()
	for i, a := range fe.agents {
		bk := fe.topo.Backup(i)
		if bk < 0 || !a.up || a.closed || a.done || fe.orphaned(i) {
			// An orphan on its way to a new parent (or below one) cannot
			// be reached: it is dealt its backup once its loss is over.
			continue
		}
		held, ok := fe.backupsUp[i] // the backup it last said it holds a link to
		if b := fe.agents[bk]; (bk != before[i] || !ok || held != bk) && b.up && !b.closed && !b.done {
			fe.sendBackup(a)
		} else {
			fe.sendFallbacks(a) // its grandparent may be another
		}
	}
	fe.journalPlan(why)
}

// refreshReplicaPeers tells the root's children where the replica agents
// are once a relaunched replica host's replica joined in a lost one's
// place (its address is new, its node may be a spare's).
func (fe *frontend) refreshReplicaPeers() {
	if fe.replicaPeers == nil {
		return // not all up yet: agentUp sends the first list
	}
	ps := fe.replicaAddrs()
	if slices.Equal(ps, fe.replicaPeers) {
		return
	}
	fe.replicaPeers = ps
	fe.sendReplicas()
}

// replicaAddrs lists, by index, the replica agents that are up and where
// they listen.
func (fe *frontend) replicaAddrs() []proto.PeerAddr {
	var ps []proto.PeerAddr
	for i := range fe.replicaNodes {
		if b := fe.agents[i]; b.up && b.info.Addr != "" {
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
		if b.rootChild && b.up && !b.closed {
			_ = b.send(proto.MReplicas, fe.replicasMsg())
		}
	}
}

// expectReplica notes that agent a was given a root replica: the job's end
// waits for it to join (replicasSettled).
func (fe *frontend) expectReplica(a *agentHandle) {
	a.replica = true
	delete(fe.replicasDone, a.name)
}

// replicasMsg is the list of replica agents for the root's children.
func (fe *frontend) replicasMsg() []byte {
	return proto.Replicas{Peers: fe.replicaPeers, FrontEndVotes: !fe.frontEndOut}.Encode()
}
