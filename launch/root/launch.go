package root

// The root's side of the launch: placing agents in the tree, starting the
// root's children, and giving each agent that connects back its share.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// startAgents arranges the job's agents, one per node with ranks, and starts
// them (a local agent on a socketpair, or a launch tree); it does not wait.
func (fe *frontend) startAgents(ctx context.Context) error {
	n := fe.opts.N
	pl := fe.opts.Placement
	if pl == nil {
		var err error
		if pl, err = alloc.PlaceLocal(fe.opts.TestNodes, n); err != nil { // this machine's nodes
			return err
		}
	}
	fe.tmpl = proto.NodeSpec{
		JobID: fe.jobID, Argv: fe.opts.Argv, Env: fe.opts.Env, Wdir: fe.opts.Wdir,
		Size: n, KillAfter: fe.opts.KillAfter, Heartbeat: fe.opts.Heartbeat, Timing: fe.opts.Timing,
		ProcessMapping: alloc.ProcessMapping(pl),
		Apps:           fe.opts.Apps, Bind: fe.opts.Bind, BindShare: fe.opts.BindShare,
		Restart: fe.opts.Restart.String(), MPI: fe.opts.MPI, RootMerge: fe.rootMerge,
	}
	fe.verbosef("ranks are served %s (--mpi)", proto.MPIName(fe.opts.MPI))
	for i, node := range pl.Nodes {
		a := &agentHandle{idx: i, name: node.Name, ranks: node.Ranks, outNext: 1, inc: 1}
		if len(a.ranks) > 0 && a.ranks[0] == 0 {
			fe.stdinAgent = a
		}
		fe.agents = append(fe.agents, a)
	}
	fe.liveN = len(fe.agents)
	if !fe.opts.Agents.Remote() && fe.opts.TestNodes <= 1 {
		fe.topo = topology.Flat([]string{fe.agents[0].name})
		fe.rec = recovery.New(fe.plannerConfig())
		if err := fe.startLocal(fe.agents[0]); err != nil {
			return fmt.Errorf("start agent for node %s: %w", fe.agents[0].name, err)
		}
		return nil
	}
	if err := fe.arrangeTree(); err != nil {
		return err
	}
	fe.rec = recovery.New(fe.plannerConfig())
	if err := fe.issueRoot(); err != nil {
		return err
	}
	children, err := launcher.ChildSpecs(fe.ca, fe.topo, fe.nameOf, fe.topo.Children(topology.Root))
	if err != nil {
		return err
	}
	fe.launchBegan = time.Since(fe.start)
	rl, err := fe.opts.Agents.StartRoot(ctx, launcher.RootStart{
		Creds: fe.rootCreds, Job: fe.jobID, Leaf: fe.plan.IsLeafLauncher(0), Children: children,
		Logf: fe.out.Logf, Go: fe.goFunc, Started: fe.launched(), Asked: fe.asked,
	})
	if err != nil {
		return err
	}
	fe.ln, fe.cancelLaunch, fe.relaunch, fe.fences = rl.Listener, rl.Cancel, rl.Relaunch, rl.Fences
	fe.startGossip(ctx)
	fe.verbosef("launching %d agent(s) for %d rank(s): %s tree of depth %d", len(fe.agents), n, fe.plan.Kind, fe.plan.Depth())
	return nil
}

// arrangeTree plans the tree over the front-end (plan node 0) and agent i (i+1).
func (fe *frontend) arrangeTree() error {
	kind, flat, err := fe.opts.Agents.TreeKind(fe.opts.Tree)
	if err != nil {
		return err
	}
	if flat {
		fe.verbosef("one srun step for every agent (--slurm-start group or auto): the front-end starts them all (a flat tree)")
	}
	pl, err := fe.buildPlan(kind, len(fe.agents)+1, plan.Params{Replicas: max(fe.opts.Replicas, 1)})
	if err != nil {
		return err
	}
	fe.plan, fe.tree, fe.tmpl.Launch = pl, true, fe.opts.Agents.Spec(false)
	fe.replicaNodes = topology.ReplicaAgents(pl)
	fe.topo, err = topology.FromPlan(pl, fe.agentNames())
	return err
}

// startReader passes a direct child's messages, then its link's end, to the loop.
func (fe *frontend) startReader(a *agentHandle) {
	fe.goFunc(func() {
		err := a.link.Run(fe.ctx, fe.opts.Heartbeat, fe.opts.Timing.LinkTimeout(fe.opts.Heartbeat), func(typ uint8, p []byte) error {
			if !fe.put(evMessage{agent: a, typ: typ, p: p}) {
				return fe.ctx.Err()
			}
			return nil
		})
		fe.put(evLinkEnd{agent: a, err: proto.PlainLinkError(err)})
	})
}

// agentUp sends an agent that connected back its share of the job, or,
// when the job is already over, tells it to exit.
func (fe *frontend) agentUp(a *agentHandle, up proto.ChildUp) {
	if l := fe.link(a); l.Up || l.Closed {
		return
	}
	fe.step(recovery.AgentUp{Agent: a.idx})
	a.info, a.upAt, a.via = up, time.Since(fe.start), fe.agents[fe.topo.Top(a.idx)].link
	if fe.status().Ending() {
		_ = a.send(proto.MShutdown, nil)
		return
	}
	spec := fe.tmpl.ForNode(a.name, a.idx, a.ranks, up.Addr)
	if a.inc > 1 {
		spec.Relaunch = launcher.RelaunchSpec(a.inc, a.ranks, fe.status(), fe.ledger(), fe.colls.Epoch(), fe.table)
	}
	spec.Prestage = fe.stage != nil
	if spec.Prestage && fe.rootChild(a) { // deeper agents get it from their parent
		if err := fe.stage.Send(a.send); err != nil {
			fe.step(recovery.LaunchError{Node: a.name, Msg: fmt.Sprintf("prestage to node %s: %v", a.name, err)})
			return
		}
	}
	if fe.replicaNodes[a.idx] && (a.inc <= 1 || fe.journal.Replica() != nil) {
		// A relaunched incarnation takes its lost voter's place once the
		// group leads, so that the group keeps its size.
		spec.Replica = fe.replicaSpec()
		fe.expectReplica(a)
	}
	spec.Survive, spec.RootChild = fe.opts.Replicas > 1, fe.rootChild(a)
	if fe.tree {
		spec.Tree, spec.Launch = true, fe.opts.Agents.SuccessorSpec(fe.tmpl.Launch, fe.topo.LeafLauncher(a.idx))
		cs, err := launcher.ChildSpecs(fe.ca, fe.topo, fe.nameOf, fe.topo.Children(a.idx))
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
	fe.journal.AgentUp(journal.AgentUp{Node: a.name, Incarnation: a.inc, Addr: up.Addr, Launched: now.Add(-up.Up), SSH: up.SSH, Connected: now, Start: fe.opts.Agents.StartedBy()})
	fe.agentsUp++
	fe.showProgress()
	fe.verbosef("node %s: agent up (%s)", a.name, launcher.UpWords(a.local, fe.opts.Agents.StartedBy(), up))
	// The root's children learn where the replica agents are (their next root).
	if fe.replicaNodes[a.idx] && fe.replicas.Peers == nil {
		if ps := fe.replicaAddrs(); len(ps) == len(fe.replicaNodes) {
			fe.replicas.Peers = ps
			fe.sendReplicas()
		}
	} else if fe.replicas.Peers != nil && fe.rootChild(a) && len(fe.replicaNodes) > 0 {
		_ = a.send(proto.MReplicas, fe.replicas.Encode())
	}
	// Standby links: its own to its backup, and those whose backup it is.
	for _, x := range fe.links().BackupsOnUp(a.idx) {
		fe.sendBackup(fe.agents[x])
	}
	if fe.agentsUp == len(fe.agents) && fe.plan != nil {
		fe.launchReport()
	}
	fe.step(recovery.LaunchUp{}) // a restart held for the launch goes once every agent is up
}

// sendBackup tells agent a where its backup parent listens, once known.
func (fe *frontend) sendBackup(a *agentHandle) {
	if b := fe.agents[fe.topo.Backup(a.idx)]; b.info.Addr != "" && !fe.link(b).Closed {
		fe.sendFallbacks(a)
		_ = a.send(proto.MBackup, proto.PeerAddr{Idx: b.idx, Name: b.name, Addr: b.info.Addr}.Encode())
	}
}

// sendFallbacks gives agent a the parents to try beyond its backup (the
// planner's choice) if they changed since it was told: the root as a's top
// ancestor reached it, under the name in its certificate (a successor's node's).
func (fe *frontend) sendFallbacks(a *agentHandle) {
	root := proto.PeerAddr{Idx: -1, Name: proto.RootName, Addr: fe.agents[fe.topo.Top(a.idx)].link.TCPLocalAddr()}
	if fe.role == roleSuccessor {
		root.Name = fe.rootNode
	}
	ps, told := launcher.FallbackPeers(fe.links().Fallbacks(a.idx), root, func(x int) proto.PeerAddr {
		return proto.PeerAddr{Idx: x, Name: fe.agents[x].name, Addr: fe.agents[x].info.Addr}
	})
	if len(ps) > 0 && !slices.Equal(ps, a.fallbacks) && a.send(proto.MFallbacks, proto.EncodePeers(ps)) == nil {
		a.fallbacks = ps
		fe.step(recovery.FallbacksTold{Agent: a.idx, Parents: told})
	}
}

// replicaSpec is what a replica agent is given.
func (fe *frontend) replicaSpec() proto.ReplicaSpec {
	var placement [][]int
	for _, b := range fe.agents {
		placement = append(placement, b.ranks)
	}
	return launcher.ReplicaSpec(fe.journal.Dir(), fe.opts.Replicas, fe.ca, placement)
}

// startLocal starts this machine's agent on a socketpair link and reads it.
func (fe *frontend) startLocal(a *agentHandle) error {
	la, conn, err := launcher.StartLocal(launcher.LocalConfig{
		Node: a.name, JobID: fe.jobID, AgentPath: fe.opts.Agents.Path, Stderr: fe.opts.Stderr,
		Verbose: fe.opts.Verbose, Began: fe.start, Verbosef: fe.verbosef,
		InProcess: fe.opts.Agents.InProcess, Run: fe.local.Run, Start: fe.local.Start,
	})
	if err != nil {
		return err
	}
	a.local, a.link = la, proto.NewLink(conn)
	fe.startReader(a)
	fe.agentUp(a, proto.ChildUp{Idx: a.idx})
	return nil
}
