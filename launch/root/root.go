package root

// The root: the state its event loop owns (frontend), its handles on agents,
// the events its goroutines send it, and its messages to the user.

import (
	"context"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// frontend is the root of a job: the front-end's, or a successor's that
// took the root over (role). All its fields, those of the parts it embeds
// too, are owned by the goroutine running loop. Each part is one owner's
// state; the embedding keeps their names short at the call sites.
type frontend struct {
	role role
	// hooks break or hold the recovery on purpose (Run's, from its environment).
	hooks    testHooks
	opts     Options
	local    LocalHooks // this machine's agent in the root's process (the facade's)
	start    time.Time  // when this root began (its timings count from here)
	jobStart time.Time  // when the job began (a successor's began later)
	jobID    string
	ctx      context.Context // Run's: ends every goroutine of the job
	events   chan event      // what launches and links report to loop
	wg       sync.WaitGroup  // the root's goroutines (goFunc); joined before Run returns
	agents   []*agentHandle
	// slots: the nodes' slots, where a silent node's ranks may go.
	slots     map[string]int
	rec       *recovery.Planner // decides what failures do to the job
	colls     *proto.Gather     // the collectives: merged, answered, their latest answers
	collStats proto.CollStats   // their totals, which the state log records (journal.go)
	// rootMerge: rootMergeEnv is set (make bench-coll only).
	rootMerge   bool
	exitCode    int
	liveN       int       // agents hosting ranks
	shutdownAt  time.Time // when the job ended and agents were told to exit
	endedAt     time.Time // when the last rank ended
	terminating bool
	nodeTableAt time.Duration

	launchState  // the launch: plan, tree, how agents start
	groupState   // the replica group and the job's state log
	ioState      // the front-end's I/O: output, stdin, signals, progress
	restartState // the restart protocol's bookkeeping (recovery.go)
}

// newFrontend is the one constructor of a root, for either role: what
// every root starts with (a planner that ends the job at its first
// failure, until the launch or the replicated state gives it the job's).
// Run and Resume add what their role has.
func newFrontend(r role, opts Options, out *output.Writer, jobID string, hooks testHooks) *frontend {
	return &frontend{
		role: r, hooks: hooks, opts: opts, start: time.Now(), jobID: jobID,
		colls:      proto.NewGather(opts.N),
		rootMerge:  os.Getenv(rootMergeEnv) == "1",
		groupState: groupState{replicas: proto.Replicas{FrontEndVotes: true}},
		rec:        recovery.New(recovery.Config{Policy: recovery.None, Ranks: opts.N}),
		ioState:    ioState{out: out},
	}
}

// rootMergeEnv, set to 1, has the agents combine no collective and the
// root merge them all: for make bench-coll's comparison only.
const rootMergeEnv = "FTLAUNCH_COLL_ROOT_MERGE"

// role is what a frontend serves: the job from its front-end, or the job
// a successor took over from a lost root.
type role int

const (
	roleFrontEnd  role = iota // Run: it starts the job
	roleSuccessor             // Resume: it took the root over, in a replica agent
)

// testHooks break or hold the recovery on purpose, for end-to-end tests
// that need a recovery stopped half-way or broken (holdEnv, breakEnv).
type testHooks struct {
	holdAt  string // the phase to hold (holdEnv)
	breakAt string // the recovery's part to break (breakEnv)
}

// launchState is the launch: the plan and the tree, how agents are started
// and what they are given.
type launchState struct {
	plan *plan.Plan     // the launch plan (nil: one local agent, or a successor's)
	topo *topology.Tree // the launch tree: who is whose parent, backup, child
	tree bool           // agents start agents (a plan, or a successor's rebuilt tree)
	// tmpl is what every agent is told of the job (agentUp adds its
	// node's part): from the options, or a successor's own agent's spec.
	tmpl proto.NodeSpec
	// relaunch starts root children after the launch (those a successor
	// found unstarted, a lost agent again), each reported to report.
	relaunch     func(cs []proto.ChildSpec, report func(launcher.LaunchResult)) error
	ca           *secure.CA
	ln           net.Listener
	cancelLaunch context.CancelFunc
	launchBegan  time.Duration
	model        *calibrate.Planned // the plan with the launch-time model's prediction
	stage        *proto.Staged      // the program, with --prestage
	treeTells    journal.TreeTells  // the tree changes not committed yet (commitTree)
	// gossip is the root's member of the job's gossip cluster (nil: none);
	// awake, how long the root could listen: gossip's word is weighed
	// against its links' silence only for that long.
	gossip   *membership.Member
	awake    *proto.Awake
	agentsUp int              // agents that got their job
	fences   *launcher.Fences // kill what lost agents left on their nodes
}

// groupState is the root's replica group and the job's state log.
type groupState struct {
	rootTerm     uint64 // the raft term a successor took the root over in (0: the front-end)
	rootNode     string // where the root runs (live report)
	journal      *journal.Group
	releaseTimer *time.Timer  // lets the journal's replica start after the launch
	replicaNodes map[int]bool // agents hosting root replicas
	rootCreds    *secure.Credentials
	// replicas is what the root's children are told of the replica agents
	// (Peers: nil until all are up) and of the lost front-end's vote.
	replicas proto.Replicas
}

// ioState is the front-end's I/O: the user's output and stdin, signals,
// the live launch line.
type ioState struct {
	out        *output.Writer
	stdinAgent *agentHandle
	input      *output.Stdin   // the front-end's stdin for rank 0's agent (nil: none)
	launching  output.Progress // the live launch line
	stops      output.StopGate // which SIGCONT goes on to the ranks (loop)
}

// restartState is the root's side of the restart protocol (recovery.go).
type restartState struct {
	table      [][]byte  // the node table (I-tuples by rank) as published and patched
	failedAt   time.Time // the failure the recovery in progress began with
	recoveryAt time.Time // the last phase committed
	recoveries int       // recoveries over (every agent acknowledged the last phase)
}

// agentHandle is the root's handle on one agent. How its link stands is
// the planner's (fe.link); whether it is a child of the root, the tree's.
type agentHandle struct {
	idx     int
	name    string
	inc     uint64               // the agent's incarnation on its node (1: the first)
	local   *launcher.LocalAgent // the agent on this machine, on a socketpair
	sess    spawn.Session        // an agent the front-end started in a launch tree
	link    *proto.Link          // the front-end's link to it, if it is a direct child
	via     *proto.Link          // the link it is reached through (set once up)
	ranks   []int
	outNext output.Next // its next output frame to write (0: not known yet)

	replica bool // it was given a root replica to host (it joins the group)
	// replaces is the raft ID of the voter its replica takes the place of
	// ("": none): a lost replica host's, when it starts again on a spare.
	replaces string
	// resynced: it moved and was asked to report again: what it reports
	// twice is taken once, quietly.
	resynced  bool
	fallbacks []proto.PeerAddr // the parents beyond its backup it was last told to try

	info    proto.ChildUp // its start, as its launcher measured it
	upAt    time.Duration // when the front-end activated it
	specAt  time.Duration // when its job was sent
	ranksAt time.Duration // when its ranks were reported running

	route launcher.Route // sends on via, held while the tree change that moved it is not committed
}

// send writes a message for the agent: on its link, or routed through the
// tree (launcher.Route).
func (a *agentHandle) send(typ uint8, p []byte) error {
	return a.route.Send(a.via, a.link, a.idx, typ, p)
}

// flush sends what was held for the agent while its move was committed.
func (a *agentHandle) flush() { a.route.Flush(a.via, a.link, a.idx) }

// end is the agent's process or session, to kill or wait for.
func (a *agentHandle) end() launcher.AgentEnd { return launcher.AgentEnd{Local: a.local, Sess: a.sess} }

// An event is what the root's goroutines report to its event loop.
type event interface{ isRootEvent() }

// evMessage: a message from an agent (on its link, or relayed).
type evMessage struct {
	agent *agentHandle
	typ   uint8
	p     []byte
}

// evLinkEnd: the link to one of the root's children ended.
type evLinkEnd struct {
	agent *agentHandle
	err   error
}

// evLaunched: a start by the root's own launcher (up, or failed).
type evLaunched struct{ res launcher.LaunchResult }

// evReplicaDone: a replica agent joined the group (or will not).
type evReplicaDone struct {
	name   string
	joined bool // it is a voter of the group
}

// evAdopt: a successor root: a child of the lost root asks for adoption.
type evAdopt struct{ req launcher.AdoptRequest }

// evAdoptTimeout: a successor root: time is up for adoptions.
type evAdoptTimeout struct{}

// evStdin: a chunk of the front-end's stdin for rank 0.
type evStdin struct{ c output.Chunk }

// evResume: a successor root: start the root's children never started.
type evResume struct{}

func (evMessage) isRootEvent()      {}
func (evLinkEnd) isRootEvent()      {}
func (evLaunched) isRootEvent()     {}
func (evReplicaDone) isRootEvent()  {}
func (evAdopt) isRootEvent()        {}
func (evAdoptTimeout) isRootEvent() {}
func (evResume) isRootEvent()       {}
func (evStdin) isRootEvent()        {}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// showProgress updates the live launch line (output.Progress): from the
// launch's goroutines before the event loop starts, from the loop after.
func (fe *frontend) showProgress() {
	fe.launching.Show(fe.out, fe.agentsUp, len(fe.agents), fe.ledger().StartedCount(), fe.opts.N, fe.status().Failure != nil)
}

// The root calls its planner through these four only: decide (Step:
// events in, actions out) and three read-only views.

// decide gives the planner an event and returns its actions, carried out
// by step (or dropped, by a root that cannot carry them out any more).
func (fe *frontend) decide(ev recovery.Event) []recovery.Action { return fe.rec.Step(ev) }

// status is where the job stands (recovery.Status), read-only: the root
// gates its I/O on it (an ending job refuses adoptions) and reports it.
func (fe *frontend) status() recovery.Status { return fe.rec.Status() }

// ledger is the planner's rank ledger, read-only: the root counts the
// job's end and an agent's ended ranks from it, not re-deriving it.
func (fe *frontend) ledger() recovery.Ledger { return fe.rec.Ledger() }

// links is how the root's links to the agents stand (up, ended, done,
// adopted), read-only: the root sends to, waits for and counts the agents
// by it; the planner keeps it from what the root tells it and decides.
func (fe *frontend) links() recovery.Links { return fe.rec.Links() }

// link is how the root's link to agent a stands (links).
func (fe *frontend) link(a *agentHandle) recovery.AgentLink { return fe.links().Link(a.idx) }

// rootChild reports whether agent a is a child of the root in the launch
// tree (the planner's, which the root reads).
func (fe *frontend) rootChild(a *agentHandle) bool { return fe.topo.Parent(a.idx) == topology.Root }

// nodeOf names the node rank runs on ("?": none known).
func (fe *frontend) nodeOf(rank int) string {
	if n := fe.ledger().Agent(rank); n >= 0 && n < len(fe.agents) {
		return fe.agents[n].name
	}
	return "?"
}

// warnf tells the user, on stderr; verbosef, with --verbose only.
func (fe *frontend) warnf(format string, args ...any) {
	fe.out.Logf("ftlaunch: "+format, args...)
}

func (fe *frontend) verbosef(format string, args ...any) {
	if fe.opts.Verbose {
		fe.warnf("[%7.3fs] "+format, append([]any{time.Since(fe.start).Seconds()}, args...)...)
	}
}

// goFunc runs f on a goroutine the root owns: Run (or the successor's
// loop) joins it before returning, so f must end with the root's context.
func (fe *frontend) goFunc(f func()) { fe.wg.Go(f) }

// launched passes a start by the root's own launcher to the event loop;
// once the root's context ended, a session that started is closed.
func (fe *frontend) launched() func(launcher.LaunchResult) {
	return func(res launcher.LaunchResult) {
		if !fe.put(evLaunched{res: res}) && res.Sess != nil {
			_ = res.Sess.Close()
		}
	}
}
