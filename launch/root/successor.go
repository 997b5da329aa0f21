package root

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Root failover, the successor's side. When the front-end of a job with
// replicated root state dies, the raft group elects one of the replica
// agents. That agent, once it also lost its own link to the front-end,
// takes over: it commits an epoch bump naming itself (the leader change
// is in the event log), rebuilds the root's view of the job from the
// replicated state (plan, node table, exits), and runs the front-end's
// event loop over the links of the root's children, which ask it to adopt
// them (its own agent too, over its own listener). Output from then on
// goes to files in the job's state directory (output/rank.R.out, .err;
// output/ftlaunch.log for ftlaunch's messages); the final status is
// committed as the front-end would have.

// Successor is a root running inside a replica agent.
type Successor struct {
	fe   *frontend
	done chan struct{}
}

// Adopt hands a request for adoption to the successor root (asked).
func (s *Successor) Adopt(conn net.Conn, h proto.Hello) {
	s.fe.asked(launcher.AdoptRequest{Conn: conn, Hello: h})
}

// asked hands a request for adoption to the event loop; once the root's
// context ended, it refuses by closing the connection.
func (fe *frontend) asked(req launcher.AdoptRequest) {
	if !fe.put(evAdopt{req: req}) {
		req.Conn.Close()
	}
}

// Resume builds and starts the successor root from the replicated state;
// it runs until the job ended (successor.done) or ctx, which the replica
// agent owns, is cancelled. observe is Options.Observe (nil: none), for
// tests that run replica agents in their process.
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
	// What the agents it starts are told of the job is as this root's own
	// agent was told it (its NodeSpec: fe.tmpl); its options keep what
	// the root itself reads of it: the detectors' bounds, the binding for
	// --verbose; its log is a file, for after the fact: verbose. Not
	// carried over: the gossip cluster (agents it starts do not join it)
	// and prestaging (they run the program from its path).
	opts := Options{
		N: st.Job.Size, Argv: tk.Job.Argv, Verbose: true, Bind: spec.Bind, Observe: observe,
		KillAfter: spec.KillAfter, Heartbeat: spec.Heartbeat, Timing: spec.Timing, Replicas: spec.Replica.Replicas,
	}
	// ctx is the successor's own: the agent that runs it cancels it and
	// joins the root once its own link ended (launch/agent's
	// stopSuccessor).
	sctx, stop := context.WithCancel(ctx)
	events := make(chan event, 256)
	fe := newFrontend(roleSuccessor, opts, out, st.Job.ID, testHooks{}) // successors do not hold
	fe.jobStart, fe.ctx, fe.events = tk.Job.Start, sctx, events
	fe.tree, fe.tmpl = true, spec.Template()
	fe.tmpl.RootMerge = fe.rootMerge // the root's own setting, as the front-end's (ring.go)
	fe.replicas.Peers, fe.rootNode, fe.rootTerm = cfg.Peers, spec.Node, st.LeaderTerm
	fe.replicaNodes, fe.ca = tk.Replicas, tk.CA
	fe.resume(tk)
	fe.relaunch = cfg.Relauncher(sctx, launcher.RelaunchHooks{
		Logf: fe.out.Logf,
		Go:   fe.goFunc,
	})
	fe.fences = launcher.NewFences(cfg.Fence, fe.goFunc)
	// Its journal writes on the replica as it is (the job's record is
	// not written again).
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
		// Deferred calls run last-in first-out: the root's context ends,
		// then its goroutines are joined, then its log is closed.
		defer close(s.done)
		defer logf.Close()
		defer fe.wg.Wait()
		defer stop()
		fe.out.Start()
		if cfg.Gossip != nil {
			fe.goFunc(func() { fe.forwardGossip(sctx, cfg.Gossip) })
		}
		// A child of the root that does not come back in time is lost;
		// those the front-end had not started yet (none of them was
		// recorded up, none asked to be adopted) are started by this root.
		fe.after(fe.adoptBound(), evAdoptTimeout{})
		fe.after(recovery.StartWait, evResume{})
		fe.writeLive() // status shows the new root at once
		fe.goneAtOnce(cfg.Gone)
		code := fe.loop(sctx, events)
		fe.exitCode = code
		fe.closeJournal()
		fe.out.Close()
	}()
	return s, nil
}

func (s *Successor) Wait(d time.Duration) {
	select {
	case <-s.done:
	case <-time.After(d):
	}
}

// adoptBound is how long a successor waits for the root's children to ask
// for adoption: their own bound on finding a new root and
// recovery.AdoptMargin.
func (fe *frontend) adoptBound() time.Duration {
	return fe.opts.Timing.AdoptWait() + recovery.AdoptMargin
}

// resume sets up the root's view from the replicated state alone
// (launcher.Takeover): agents in plan order (the front-end's indexes),
// their tree, the ranks that ended, the node table, and its planner
// (successorPlanner).
func (fe *frontend) resume(tk *launcher.Takeover) {
	r := tk.Resumed
	for i, ra := range r.Agents {
		a := &agentHandle{idx: i, name: ra.Name, inc: 1, ranks: ra.Ranks}
		if ra.Up {
			a.info = proto.ChildUp{Idx: i, Addr: ra.Addr}
			fe.agentsUp++
		}
		fe.agents = append(fe.agents, a)
	}
	fe.topo = tk.Tree
	fe.liveN = len(fe.agents)
	fe.rec = fe.successorPlanner(tk.State, tk.Job, r)
	fe.colls.SetEpoch(tk.CollEpoch)
}

// successorPlanner is the planner of a root that took over
// (recovery.ResumedPlanner), under the job's policy as its record has it; the
// root takes from it the agents relaunched before (their
// incarnation and node, a spare's).
func (fe *frontend) successorPlanner(st *raftstore.State, job journal.Job, r *journal.Resumed) *recovery.Planner {
	fe.opts.Restart, _ = recovery.ParsePolicy(cmp.Or(job.Restart, "none"))
	fe.opts.MaxRestarts, fe.opts.Spares = job.MaxRestarts, job.Spares
	fe.slots, fe.opts.Oversubscribe = job.Slots, job.Oversubscribe
	cfg := fe.plannerConfig()
	cfg.RootNode = fe.rootNode
	for x := range fe.replicaNodes {
		cfg.ReplicaHosts = append(cfg.ReplicaHosts, x)
	}
	p := recovery.ResumedPlanner(cfg, st, r)
	fe.table = r.Table
	for i, a := range fe.agents {
		a.inc = p.AgentIncarnation(i)
		if n := p.AgentNode(i); n != "" {
			a.name = n // on a spare
		}
	}
	return p
}

// resumeLaunch probes the replica peers (launcher.ProbeGone) and starts
// the root's children the planner names (recovery.ProbePeers,
// StartChildren): the front-end had not started them.
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
	if fe.relaunch == nil {
		return
	}
	cs, err := fe.childSpecs(missing)
	if err == nil {
		err = fe.relaunch(cs, fe.launched())
	}
	names := make([]string, len(missing))
	for i, x := range missing {
		names[i] = fe.agents[x].name
		if err != nil {
			fe.launchFailed(fe.agents[x], fmt.Sprintf("start the agent on %s after the root failed over: %v", names[i], err))
		}
	}
	if err == nil {
		fe.warnf("the front-end had not started node(s) %s: starting them", strings.Join(names, ", "))
	}
}

// adopt takes an agent's request for adoption (a child of the lost root
// asking a successor, or an orphan whose last fallback parent is the
// root) to the planner, which decides (recovery.AdoptAsked), and carries
// out its answer on the connection the agent asked on.
func (fe *frontend) adopt(req launcher.AdoptRequest) {
	idx := req.Hello.Idx
	ev := recovery.AdoptAsked{Agent: idx, Incarnation: req.Incarnation(), Name: req.Name()}
	var a *agentHandle // the agent asking, if it is one of the job's (launcher.AdoptRequest.From)
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

// adoptChild carries out the planner's Adopt of a child of the lost root:
// its link is this root's now.
func (fe *frontend) adoptChild(req launcher.AdoptRequest, a *agentHandle) {
	l, err := req.Accept()
	if err != nil {
		return
	}
	a.link = l
	a.via = a.link
	for _, x := range fe.topo.Subtree(a.idx) {
		fe.agents[x].via = a.link
	}
	if !fe.link(a).Up {
		// Up, with its share, before the front-end could record it: an
		// agent without one does not outlive its parent.
		a.upAt = time.Since(fe.start)
		fe.agentsUp++
	}
	fe.step(recovery.Adopted{Agent: a.idx})
	fe.startReader(a)
	// The agents below report again too.
	_ = a.link.Send(proto.MBcast, proto.Wrap(-1, proto.MResyncReq, nil))
	fe.verbosef("adopted node %s", a.name)
	fe.observe(Adopted{Node: a.name})
	// The agents below it learn where this root is, for when their parent
	// and backup parent are both lost.
	for _, x := range fe.topo.Subtree(a.idx) {
		if b := fe.agents[x]; fe.link(b).Up && !fe.link(b).Closed {
			fe.sendFallbacks(b)
		}
	}
	defer fe.feedLeader()
	if fe.terminating {
		_ = a.link.Send(proto.MBcast, proto.Wrap(-1, proto.MTerminate, proto.EncodeInt(int64(fe.opts.KillAfter))))
	}
}

// adoptTimedOut gives up on the root's children that were not adopted
// (recovery.Unadopted).
func (fe *frontend) adoptTimedOut() {
	for _, act := range fe.decide(recovery.AdoptDue{}) {
		for _, x := range act.(recovery.Unadopted).Agents {
			fe.linkEnded(fe.agents[x], fmt.Errorf("not adopted by the new root within %v", fe.adoptBound()))
		}
	}
	fe.feedLeader()
}

// evPeerGone: the agent of a replica peer is gone (why) and it was not
// adopted.
type evPeerGone struct {
	idx int
	why error
}

func (evPeerGone) isRootEvent() {}

// goneAtOnce declares lost, at once, the replica agents gone whose loss
// the planner decides (recovery.PeersGone → PeersLost).
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
