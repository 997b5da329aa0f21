package root

// The root's side of the launch: placing agents in the tree, starting the
// root's children, giving each agent that connects back its share of the job,
// and counting what never started.

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// startAgents arranges the job's agents, one per node that runs ranks,
// and starts them: one local agent on a socketpair for a job on this
// machine; otherwise a launch tree (tree.go) over SSH, or over local
// processes posing as nodes (--test-nodes). Launches report to the event
// loop on events; startAgents does not wait for them.
func (fe *frontend) startAgents(ctx context.Context, events chan<- event) error {
	n := fe.opts.N
	pl := fe.opts.Placement
	if pl == nil {
		var err error
		if pl, err = alloc.PlaceLocal(fe.opts.TestNodes, n); err != nil { // this machine's nodes
			return err
		}
	}
	fe.mapping = alloc.ProcessMapping(pl)
	fe.verbosef("ranks are served %s (--mpi)", mpiName(fe.opts.MPI))
	for i, node := range pl.Nodes {
		a := &agentHandle{idx: i, name: node.Name, ranks: node.Ranks, outNext: 1, inc: 1}
		for _, r := range a.ranks {
			fe.ranks[r].node = i
		}
		if len(a.ranks) > 0 && a.ranks[0] == 0 {
			fe.stdinAgent = a
		}
		fe.agents = append(fe.agents, a)
	}
	fe.liveN = len(fe.agents)
	if !fe.opts.Agents.Remote() && fe.opts.TestNodes <= 1 {
		fe.setTree(topology.Flat([]string{fe.agents[0].name}))
		fe.rec = recovery.New(fe.plannerConfig())
		a := fe.agents[0]
		if err := fe.spawnAgent(a); err != nil {
			return fmt.Errorf("start agent for node %s: %w", a.name, err)
		}
		fe.startReader(ctx, a, events)
		fe.agentUp(a, proto.ChildUp{Idx: a.idx})
		return nil
	}
	if err := fe.arrangeTree(); err != nil {
		return err
	}
	fe.rec = recovery.New(fe.plannerConfig())
	if err := fe.issueRoot(); err != nil {
		return err
	}
	ln, sp, hosts, err := fe.opts.Agents.Listen(ctx, fe.rootCreds)
	if err != nil {
		return err
	}
	if fe.opts.Agents.Remote() {
		fe.startGossip(ctx, "", proto.OwnAddrs())
	} else { // test nodes
		fe.startGossip(ctx, "127.0.0.1", []string{"127.0.0.1"})
	}
	fe.ln = ln
	children, err := fe.childSpecs(fe.topo.Children(topology.Root))
	if err != nil {
		return err
	}
	l := fe.opts.Agents.RootLauncher(sp, ln, hosts, fe.plan.IsLeafLauncher(0), children)
	l.Logf = func(format string, args ...any) { fe.out.Message(fmt.Sprintf(format, args...) + "\n") }
	l.Job = fe.jobID
	fe.goFunc(func() {
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		// An agent whose parent and backup are both lost may ask the
		// root to adopt it (its last fallback parent: reparent.go).
		launcher.AcceptLoop(ln, l, nil, func(conn net.Conn, h proto.Hello) {
			select {
			case fe.events <- evAdopt{req: launcher.AdoptRequest{Conn: conn, Hello: h}}:
			case <-ctx.Done():
				conn.Close()
			}
		})
	})
	lctx, cancel := context.WithCancel(ctx)
	fe.cancelLaunch = cancel
	fe.launchBegan = time.Since(fe.start)
	fe.goFunc(func() { l.Run(lctx, fe.launched(ctx)) })
	// A lost agent is started again the same way (relaunch.go), not
	// cancelled with the launch.
	fe.relaunch = func(cs []proto.ChildSpec, report func(launcher.LaunchResult)) error {
		l.StartAgain(ctx, cs, fe.goFunc, report)
		return nil
	}
	fe.fence = func(ctx context.Context, node string, upTo uint64) (string, error) {
		return l.Fence(ctx, fe.jobID, node, upTo)
	}
	fe.verbosef("launching %d agent(s) for %d rank(s): %s tree of depth %d", len(fe.agents), n, fe.plan.Kind, fe.plan.Depth())
	return nil
}

// arrangeTree builds the launch plan over the front-end (plan node 0) and
// the agents (agent i is plan node i+1).
func (fe *frontend) arrangeTree() error {
	kind, err := plan.ParseKind(cmp.Or(fe.opts.Tree, "auto"))
	if err != nil {
		return fmt.Errorf("--tree: %w", err)
	}
	if fe.opts.Agents.Slurm() && fe.opts.Agents.GroupStart && kind.Shape != plan.Flat {
		// One step for every agent: the front-end starts them all.
		fe.verbosef("one srun step for every agent (--slurm-start group or auto): the front-end starts them all (a flat tree)")
		kind, _ = plan.ParseKind("flat")
	}
	pl, err := fe.buildPlan(kind, len(fe.agents)+1, plan.Params{Replicas: max(fe.opts.Replicas, 1)})
	if err != nil {
		return err
	}
	fe.plan, fe.tree = pl, true
	fe.replicaNodes = map[int]bool{}
	for _, v := range pl.ReplicaNodes[1:] {
		fe.replicaNodes[int(v)-1] = true
	}
	names := make([]string, len(fe.agents))
	for i, a := range fe.agents {
		names[i] = a.name
	}
	t, err := topology.FromPlan(pl, names)
	if err != nil {
		return err
	}
	fe.setTree(t)
	return nil
}

// setTree makes t the root's launch tree.
func (fe *frontend) setTree(t *topology.Tree) {
	fe.topo = t
	for _, a := range fe.agents {
		a.rootChild = t.Parent(a.idx) == topology.Root
	}
}

// childSpecs issues the credentials of the given agents and describes them
// for their launcher.
func (fe *frontend) childSpecs(idx []int) ([]proto.ChildSpec, error) {
	cs := make([]proto.ChildSpec, 0, len(idx))
	for _, i := range idx {
		a := fe.agents[i]
		creds, err := fe.ca.Issue(a.name)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", a.name, err)
		}
		cs = append(cs, proto.ChildSpec{Idx: i, Name: a.name, Creds: creds.Marshal(), Sub: fe.topo.Subtree(i)})
	}
	return cs, nil
}

// startReader reads a direct child's link and passes its messages to the
// event loop.
func (fe *frontend) startReader(ctx context.Context, a *agentHandle, events chan<- event) {
	fe.goFunc(func() {
		err := a.link.Run(ctx, fe.opts.Heartbeat, fe.opts.Timing.LinkTimeout(fe.opts.Heartbeat), func(typ uint8, p []byte) error {
			select {
			case events <- evMessage{agent: a, typ: typ, p: p}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		select {
		case events <- evLinkEnd{agent: a, err: proto.PlainLinkError(err)}:
		case <-ctx.Done():
		}
	})
}

// agentUp sends an agent that connected back its share of the job, or,
// when the job is already over, tells it to exit.
func (fe *frontend) agentUp(a *agentHandle, up proto.ChildUp) {
	if a.up || a.closed {
		return
	}
	a.up, a.info, a.upAt = true, up, time.Since(fe.start)
	if a.rootChild {
		a.via = a.link
	} else {
		a.via = fe.agents[fe.topo.Top(a.idx)].link
	}
	if fe.status().Ending() {
		_ = a.send(proto.MShutdown, nil)
		return
	}
	spec := &proto.NodeSpec{
		JobID: fe.jobID, Argv: fe.opts.Argv, Env: fe.opts.Env, Wdir: fe.opts.Wdir,
		Size: fe.opts.N, KillAfter: fe.opts.KillAfter, Heartbeat: fe.opts.Heartbeat, Timing: fe.opts.Timing,
		Node: a.name, NodeID: a.idx, Ranks: a.ranks, ProcessMapping: fe.mapping,
		Apps: fe.opts.Apps, Bind: fe.opts.Bind, BindShare: fe.opts.BindShare,
		Restart: fe.opts.Restart.String(), Gossip: fe.gossipSpec, MPI: fe.opts.MPI,
		RootMerge: fe.rootMerge,
	}
	if a.inc > 1 {
		spec.Relaunch = fe.relaunchSpec(a)
	}
	if fe.stage != nil {
		spec.Prestage = true
		if a.rootChild { // deeper agents get it from their parent
			if err := fe.stage.Send(a.send); err != nil {
				fe.step(recovery.LaunchError{Node: a.name, Msg: fmt.Sprintf("prestage to node %s: %v", a.name, err)})
				return
			}
		}
	}
	if fe.replicaNodes[a.idx] && (a.inc <= 1 || fe.journal.Replica() != nil) {
		// A relaunched incarnation hosts a replica again once the group
		// leads (raft ID: its node's name): it takes the lost voter's
		// place (addReplica's replaces), so the group keeps its size.
		spec.Replica = fe.replicaSpec()
		fe.expectReplica(a)
	}
	spec.Survive, spec.RootChild = fe.opts.Replicas > 1, a.rootChild
	if host, _, err := net.SplitHostPort(up.Addr); err == nil {
		spec.Addr = host
	}
	if fe.tree {
		spec.Tree = true
		spec.Launch = fe.launchSpec(a)
		cs, err := fe.childSpecs(fe.topo.Children(a.idx))
		if err != nil {
			fe.step(recovery.LaunchError{Node: a.name, Msg: err.Error()})
			return
		}
		spec.Children = cs
	}
	if err := a.send(proto.MSpec, spec.Encode()); err != nil {
		fe.step(recovery.LaunchError{Node: a.name, Msg: fmt.Sprintf("send the job to node %s: %v", a.name, err)})
		return
	}
	a.specAt = time.Since(fe.start)
	if a == fe.stdinAgent {
		fe.flushStdin() // what stdin gave before it came up
	}
	now := time.Now()
	fe.journal.AgentUp(journal.AgentUp{Node: a.name, Incarnation: a.inc, Addr: up.Addr, Launched: now.Add(-up.Up), SSH: up.SSH, Connected: now, Start: fe.startedBy()})
	fe.agentsUp++
	fe.showProgress()
	switch {
	case a.local != nil && a.local.InProcess:
		fe.verbosef("node %s: agent up (in the front-end's process, on a socket pair)", a.name)
	case a.local != nil:
		fe.verbosef("node %s: agent up (a local process on a socket pair)", a.name)
	case a.rootChild || fe.opts.Verbose:
		fe.verbosef("node %s: agent up (%s %.1f ms, %d attempt(s), connected %.1f ms after its launcher began)", a.name, fe.startedBy(), ms(up.SSH), up.Attempts, ms(up.Up))
	}
	// A replicated root's children learn where the replica agents are:
	// one of them adopts them if the front-end dies.
	if len(fe.replicaNodes) > 0 {
		if fe.replicaPeers == nil && fe.replicaNodes[a.idx] {
			if ps := fe.replicaAddrs(); len(ps) == len(fe.replicaNodes) {
				fe.replicaPeers = ps
				fe.sendReplicas()
			}
		} else if fe.replicaPeers != nil && a.rootChild {
			_ = a.send(proto.MReplicas, fe.replicasMsg())
		}
	}
	// Standby links: the agent to its backup parent, the agents whose
	// backup parent it is to it.
	if bk := fe.topo.Backup(a.idx); bk >= 0 && fe.agents[bk].up {
		fe.sendBackup(a)
	}
	for _, b := range fe.agents {
		if fe.topo.Backup(b.idx) == a.idx && b.up && !b.closed {
			fe.sendBackup(b)
		}
	}
	if fe.agentsUp == len(fe.agents) && fe.plan != nil {
		fe.launchReport()
	}
	fe.flushRestart()
}

func (fe *frontend) sendBackup(a *agentHandle) {
	b := fe.agents[fe.topo.Backup(a.idx)]
	if b.info.Addr == "" || b.closed {
		return
	}
	fe.sendFallbacks(a)
	_ = a.send(proto.MBackup, proto.PeerAddr{Idx: b.idx, Name: b.name, Addr: b.info.Addr}.Encode())
}

// sendFallbacks gives agent a the parents to try beyond its backup, in
// order (topology.Fallbacks), when its parent and its backup are both
// lost: its grandparent (if up) and the root (its address as a's top
// ancestor reached it), if they changed since it was last told.
func (fe *frontend) sendFallbacks(a *agentHandle) {
	var ps []proto.PeerAddr
	for _, x := range fe.topo.Fallbacks(a.idx) {
		switch {
		case x == fe.topo.Backup(a.idx):
			// Sent on its own (MBackup): it holds a standby link to it.
		case x == topology.Root:
			if addr := fe.agents[fe.topo.Top(a.idx)].link.TCPLocalAddr(); addr != "" {
				ps = append(ps, proto.PeerAddr{Idx: -1, Name: fe.certName(), Addr: addr})
			}
		default:
			if g := fe.agents[x]; g.up && !g.closed && g.info.Addr != "" {
				ps = append(ps, proto.PeerAddr{Idx: x, Name: g.name, Addr: g.info.Addr})
			}
		}
	}
	if len(ps) == 0 || slices.Equal(ps, a.fallbacks) {
		return
	}
	if a.send(proto.MFallbacks, proto.EncodePeers(ps)) == nil {
		a.fallbacks = ps
	}
}

// certName is the name in this root's certificate: the front-end's, or a
// successor's (its node's, as its agent's).
func (fe *frontend) certName() string {
	if fe.role == roleSuccessor {
		return fe.rootNode
	}
	return proto.RootName
}

// replicaSpec is what a replica agent is given: enough to take the root
// over, also in the middle of the launch.
func (fe *frontend) replicaSpec() proto.ReplicaSpec {
	rs := proto.ReplicaSpec{JobDir: fe.journal.Dir(), Replicas: fe.opts.Replicas}
	if fe.ca != nil {
		rs.CA = fe.ca.Marshal()
	}
	for _, b := range fe.agents {
		rs.Placement = append(rs.Placement, b.ranks)
	}
	return rs
}

// launchSpec tells agent a how to start its children: as the root's
// agents start (launcher.Agents.Spec), or a successor's as it was told
// itself.
func (fe *frontend) launchSpec(a *agentHandle) proto.LaunchSpec {
	leaf := fe.topo.LeafLauncher(a.idx)
	if fe.role != roleSuccessor {
		return fe.opts.Agents.Spec(leaf)
	}
	l := *fe.launchTmpl // (set by Resume, with the role)
	l.Batch = 0
	if leaf {
		l.Batch = fe.opts.Agents.Batch
	}
	return l
}

// launchReport runs once every agent is up: it keeps the calibration and,
// with --verbose, prints the launch's breakdown per launching agent.
func (fe *frontend) launchReport() {
	fe.checkModel()
	if fe.opts.Agents.Remote() && !fe.opts.Agents.GroupStart { // SSH and srun launches calibrate their model
		fe.calibrate()
	}
	if fe.opts.Verbose {
		for _, l := range calibrate.Breakdown(fe.starts(), fe.launchBegan, fe.startedBy()) {
			fe.verbosef("%s", l)
		}
	}
}

// startedBy names how the job's agents are started
// (launcher.Agents.StartedBy).
func (fe *frontend) startedBy() string { return fe.opts.Agents.StartedBy() }

// launchFailed handles an agent that could not be started: it and the
// agents below it never run, and the job fails (unless it is already
// ending).
func (fe *frontend) launchFailed(a *agentHandle, msg string) {
	if a.closed || a.up {
		return
	}
	for _, b := range fe.closeSubtree(a, nil) {
		fe.abandonRanks(b, "never started: "+msg)
		for _, r := range b.ranks { // the launch failure itself is the report
			fe.ranks[r].byFrontend = true
		}
	}
	fe.step(recovery.LaunchFailed{Node: a.name, Msg: msg})
}

// abandonRanks counts the ranks of an agent that is gone as ended (in
// the planner's ledger, recovery/ledger.go).
func (fe *frontend) abandonRanks(a *agentHandle, reason string) {
	var gone []int
	for _, r := range a.ranks {
		rs := &fe.ranks[r]
		if rs.pid > 0 && a.local != nil { // pids are meaningful on this machine only
			_ = syscall.Kill(-rs.pid, syscall.SIGKILL)
		}
		if !fe.ledger().Ended(r) {
			rs.byFrontend = fe.status().Ending()
			rs.status = proto.RankStatus{Rank: r, Code: ExitLauncher, Reason: reason}
			fe.journal.RankExited(journal.RankExit{Rank: r, Code: ExitLauncher, Reason: reason})
			gone = append(gone, r)
		}
	}
	fe.step(recovery.RanksAbandoned{Ranks: gone})
}

// spawnAgent starts this machine's agent on a socketpair link (the
// launcher's StartLocal).
func (fe *frontend) spawnAgent(a *agentHandle) error {
	la, conn, err := launcher.StartLocal(launcher.LocalConfig{
		Node: a.name, JobID: fe.jobID, AgentPath: fe.opts.Agents.Path, Stderr: fe.opts.Stderr,
		Verbose: fe.opts.Verbose, Began: fe.start,
		InProcess: fe.opts.Agents.InProcess, Run: fe.local.Run, Start: fe.local.Start,
		Verbosef: fe.verbosef,
	})
	if err != nil {
		return err
	}
	a.local, a.link = la, proto.NewLink(conn)
	return nil
}
