package root

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Root failover, the successor's side: the elected replica agent rebuilds the
// root from the replicated state and runs its loop over the root's children,
// which ask it to adopt them; output goes to files in the job's directory.

// Successor is a root running inside a replica agent.
type Successor struct {
	fe   *frontend
	done chan struct{}
}

// Adopt hands a request for adoption to the successor root (asked).
func (s *Successor) Adopt(conn net.Conn, h proto.Hello) {
	s.fe.asked(launcher.AdoptRequest{Conn: conn, Hello: h})
}

// asked hands a request for adoption to the loop, or closes it once the root ended.
func (fe *frontend) asked(req launcher.AdoptRequest) {
	if !fe.put(evAdopt{req: req}) {
		req.Conn.Close()
	}
}

// Resume builds and starts the successor root from the replicated state;
// it runs until the job ends or ctx (its agent's) is cancelled.
func Resume(ctx context.Context, cfg launcher.ResumeConfig, observe func(Event)) (*Successor, error) {
	spec := cfg.Spec
	tk, err := cfg.Takeover()
	if err != nil {
		return nil, err
	}
	st := tk.State
	out, logf, err := output.OpenJob(spec.Replica.JobDir, st.Job.Size)
	if err != nil {
		return nil, err
	}
	// Agents are told the job as its agent was (fe.tmpl); its log is a file: verbose.
	opts := Options{
		N: st.Job.Size, Argv: tk.Job.Argv, Verbose: true, Bind: spec.Bind, Observe: observe,
		KillAfter: spec.KillAfter, Heartbeat: spec.Heartbeat, Timing: spec.Timing, Replicas: spec.Replica.Replicas,
	}
	sctx, stop := context.WithCancel(ctx) // its agent ends it and joins it (stopSuccessor)
	fe := newFrontend(roleSuccessor, opts, out, st.Job.ID, testHooks{})
	fe.jobStart, fe.ctx, fe.events = tk.Job.Start, sctx, make(chan event, 256)
	fe.tree, fe.tmpl = true, spec.Template()
	fe.tmpl.RootMerge = fe.rootMerge // the root's own setting, as the front-end's (ring.go)
	fe.replicas.Peers, fe.rootNode, fe.rootTerm = cfg.Peers, spec.Node, st.LeaderTerm
	fe.replicaNodes, fe.ca = tk.Replicas, tk.CA
	for i, ra := range tk.Resumed.Agents {
		a := &agentHandle{idx: i, name: ra.Name, inc: 1, ranks: ra.Ranks}
		if ra.Up {
			a.info = proto.ChildUp{Idx: i, Addr: ra.Addr}
			fe.agentsUp++
		}
		fe.agents = append(fe.agents, a)
	}
	fe.topo, fe.liveN = tk.Tree, len(fe.agents)
	fe.rec = fe.successorPlanner(st, tk.Job, tk.Resumed)
	fe.colls.SetEpoch(tk.CollEpoch)
	fe.relaunch = cfg.Relauncher(sctx, launcher.RelaunchHooks{Logf: fe.out.Logf, Go: fe.goFunc})
	fe.fences = launcher.NewFences(cfg.Fence, fe.goFunc)
	j, err := journal.Open(sctx, journal.Config{StateDir: filepath.Dir(spec.Replica.JobDir), Node: spec.Node, Replica: cfg.Replica, Job: tk.Job})
	if err != nil {
		stop()
		logf.Close()
		return nil, err
	}
	fe.journal = journal.GroupOf(j)
	fe.publishControl(spec.Node, tk.Control)
	s := &Successor{fe: fe, done: make(chan struct{})}
	fe.warnf("node %s took over as root of job %s after the front-end was lost", spec.Node, st.Job.ID)
	fe.observe(FailoverDone{Node: spec.Node})
	go func() { // joined through s.done by the agent that runs it
		// Last in, first out: the context ends, goroutines join, log closes.
		defer close(s.done)
		defer logf.Close()
		defer fe.wg.Wait()
		defer stop()
		fe.out.Start()
		if cfg.Gossip != nil {
			fe.goFunc(func() { fe.forwardGossip(sctx, cfg.Gossip) })
		}
		// Children not adopted in time are lost; those never started, it starts.
		fe.after(fe.adoptBound(), evAdoptTimeout{})
		fe.after(recovery.StartWait, evResume{})
		fe.writeLive() // status shows the new root at once
		fe.goneAtOnce(cfg.Gone)
		fe.exitCode = fe.loop(sctx, fe.events)
		fe.closeJournal()
		fe.out.Close()
	}()
	return s, nil
}

// Wait waits for the successor's end, at most d.
func (s *Successor) Wait(d time.Duration) {
	select {
	case <-s.done:
	case <-time.After(d):
	}
}

// adoptBound is how long a successor waits for adoptions (recovery.AdoptMargin).
func (fe *frontend) adoptBound() time.Duration {
	return fe.opts.Timing.AdoptWait() + recovery.AdoptMargin
}

// successorPlanner is a successor's planner, under the job's recorded policy;
// the agents take from it their incarnation and node (a spare's, if relaunched).
func (fe *frontend) successorPlanner(st *raftstore.State, job journal.Job, r *journal.Resumed) *recovery.Planner {
	fe.opts.Restart, _ = recovery.ParsePolicy(cmp.Or(job.Restart, "none"))
	fe.opts.MaxRestarts, fe.opts.Spares = job.MaxRestarts, job.Spares
	fe.slots, fe.opts.Oversubscribe = job.Slots, job.Oversubscribe
	cfg := fe.plannerConfig()
	cfg.RootNode = fe.rootNode
	cfg.ReplicaHosts = slices.Collect(maps.Keys(fe.replicaNodes))
	p := recovery.ResumedPlanner(cfg, st, r)
	fe.table = r.Table
	for i, a := range fe.agents {
		a.inc, a.name = p.AgentIncarnation(i), cmp.Or(p.AgentNode(i), a.name)
	}
	return p
}

// resumeLaunch probes the replica peers and starts the children never started.
func (fe *frontend) resumeLaunch() {
	for _, act := range fe.decide(recovery.StartDue{}) {
		switch act := act.(type) {
		case recovery.ProbePeers:
			launcher.ProbeGone(fe.ctx, fe.replicas.Peers, act.Agents, fe.goFunc, func(x int, why error) { fe.put(evPeerGone{x, why}) })
		case recovery.StartChildren:
			fe.startChildren(act.Agents)
		}
	}
}

// startChildren starts the root's children missing with their subtrees.
func (fe *frontend) startChildren(missing []int) {
	cs, err := launcher.ChildSpecs(fe.ca, fe.topo, fe.nameOf, missing)
	if err == nil {
		err = fe.relaunch(cs, fe.launched())
	}
	names := make([]string, len(missing))
	for i, x := range missing {
		names[i] = fe.agents[x].name
		if err != nil {
			msg := fmt.Sprintf("start the agent on %s after the root failed over: %v", names[i], err)
			fe.step(recovery.LaunchFailed{Agent: x, Node: names[i], Msg: msg})
		}
	}
	if err == nil {
		fe.warnf("the front-end had not started node(s) %s: starting them", strings.Join(names, ", "))
	}
}

// adopt takes an agent's request for adoption (a child of the lost root, or an
// orphan) to the planner and carries out its answer on the connection.
func (fe *frontend) adopt(req launcher.AdoptRequest) {
	idx := req.Hello.Idx
	ev := recovery.AdoptAsked{Agent: idx, Incarnation: req.Incarnation(), Name: req.Name()}
	var a *agentHandle // the agent asking, if it is one of the job's
	if idx >= 0 && idx < len(fe.agents) && req.From(fe.agents[idx].name, fe.agents[idx].inc) {
		a = fe.agents[idx]
		ev.Known, ev.Linked = true, a.link != nil
	}
	for _, act := range fe.decide(ev) {
		switch act := act.(type) {
		case recovery.Adopt:
			if act.Orphan {
				fe.adoptAsOrphan(req, a, ev.Incarnation)
			} else {
				fe.adoptChild(req, a)
			}
		case recovery.RefuseAdoption:
			req.Refuse(act.Fenced)
			fe.narrate(act)
		default:
			fe.carryOut([]recovery.Action{act})
		}
	}
}

// adoptChild carries out the planner's Adopt of a child of the lost root.
func (fe *frontend) adoptChild(req launcher.AdoptRequest, a *agentHandle) {
	l, err := req.Accept()
	if err != nil {
		return
	}
	a.link, a.via = l, l
	for _, x := range fe.topo.Subtree(a.idx) {
		fe.agents[x].via = a.link
	}
	if !fe.link(a).Up { // it got its share before the front-end recorded it up
		a.upAt = time.Since(fe.start)
		fe.agentsUp++
	}
	fe.step(recovery.Adopted{Agent: a.idx})
	fe.startReader(a)
	_ = a.link.Send(proto.MBcast, proto.Wrap(-1, proto.MResyncReq, nil)) // the agents below report again
	fe.verbosef("adopted node %s", a.name)
	fe.observe(Adopted{Node: a.name})
	// The agents below learn where this root is (their last fallback).
	for _, x := range fe.topo.Subtree(a.idx) {
		if b := fe.agents[x]; fe.link(b).Up && !fe.link(b).Closed {
			fe.sendFallbacks(b)
		}
	}
	defer fe.feedLeader()
	if w := fe.lateWord(); w != nil {
		_ = a.link.Send(proto.MBcast, w)
	}
}

// adoptTimedOut gives up on the root's children not adopted in time.
func (fe *frontend) adoptTimedOut() {
	for _, act := range fe.decide(recovery.AdoptDue{}) {
		for _, x := range act.(recovery.Unadopted).Agents {
			fe.linkEnded(fe.agents[x], fmt.Errorf("not adopted by the new root within %v", fe.adoptBound()))
		}
	}
	fe.feedLeader()
}

// evPeerGone: a replica peer's agent is gone (why), not adopted.
type evPeerGone struct {
	idx int
	why error
}

func (evPeerGone) isRootEvent() {}

// goneAtOnce declares lost at once the replica agents the planner says are gone.
func (fe *frontend) goneAtOnce(gone []string) {
	for _, act := range fe.decide(recovery.PeersGone{Nodes: gone}) {
		for _, x := range act.(recovery.PeersLost).Agents {
			fe.peerGone(evPeerGone{x, errors.New("the link of this root's agent to the root it ran ended: its agent is gone")})
		}
	}
}

// peerGone declares lost a replica agent whose process is gone.
func (fe *frontend) peerGone(ev evPeerGone) {
	if a, l := fe.agents[ev.idx], fe.links().Link(ev.idx); !l.Adopted && !l.Closed && a.link == nil {
		fe.linkEnded(a, ev.why)
	}
}
