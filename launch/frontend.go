package launch

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// Exit codes of ftlaunch itself (a rank's failure is reported with the
// rank's own code).
const (
	ExitLauncher = recovery.ExitLauncher // ftlaunch failed: an agent could not start or was lost
	ExitUsage    = 2                     // bad command line
	ExitTimeout  = recovery.ExitTimeout  // --timeout expired
)

// Options describe one job run from this machine.
type Options struct {
	N         int           // number of ranks
	Argv      []string      // program and its arguments
	Env       []string      // the ranks' environment
	Wdir      string        // the ranks' working directory
	Label     bool          // prefix output lines with "[rank] "
	OutputDir string        // if set, write rank.R.out / rank.R.err there instead
	KillAfter time.Duration // SIGTERM to SIGKILL delay when terminating
	Timeout   time.Duration // whole-job limit (0: none)
	Verbose   bool
	TestNodes int    // local agents posing as nodes; 0 or 1: one agent for this machine
	AgentPath string // the ftlaunch executable agents run from (on every node)
	// Apps lists the programs of an MPMD job in rank order, their N adding
	// up to N (nil: Argv, Env and Wdir for every rank, which are otherwise
	// the first app's).
	Apps []App
	// Bind binds each node's ranks to CPUs: "none" (or ""), "core" or
	// "socket"; BindShare lets ranks share a core (--oversubscribe).
	Bind      string
	BindShare bool

	// Placement puts the ranks on hosts, whose agents SSH starts (nil: this
	// machine). SSH is required with a placement.
	Placement *alloc.Placement
	SSH       spawn.Spawner // what starts agents on the placement's hosts
	Launcher  string        // "ssh" or "slurm": how SSH starts agents (for interior agents and calibration)
	// GroupStart starts the front-end's agents with one group start when
	// SSH can (one srun step for all: --slurm-start group).
	GroupStart bool
	Heartbeat  time.Duration

	// The launch tree (multi-node jobs and test nodes).
	Tree string // plan kind, as `ftlaunch plan --tree` (default auto)
	// Replicas is the size of the root replica group (1, 3 or 5): the
	// job's state log is kept by the front-end and Replicas-1 agents.
	Replicas int
	// StateDir holds the job's state log (see launch/journal); "" means
	// journal.DefaultStateDir().
	StateDir string
	// Prestage copies the program down the tree to every node's local
	// storage before its ranks start; they run the copy.
	Prestage bool
	Batch    int // leaf launchers start their children in batches of this size
	// How interior agents start their children over SSH: the OpenSSH
	// configuration file (an absolute path; "" for ~/.ssh/config), whether
	// they trust unknown host keys, and whether sessions forward ssh-agent.
	SSHConfig       string
	SSHAcceptNew    bool
	SSHForwardAgent bool

	Stdin          *os.File // forwarded to rank 0 (nil: none)
	Stdout, Stderr io.Writer
	Signals        <-chan os.Signal // signals to forward to every rank

	// Detach, if set, is how the front-end leaves a replicated job on
	// SIGHUP (a dropped terminal or SSH session) once its root replica
	// group is up: it ends this process at once, as if the front-end were
	// lost, and a replica agent takes over as root (ftlaunch attach
	// follows the job). Without it, or before the group is up, SIGHUP
	// ends the job as SIGTERM does.
	Detach func(jobID string)

	// startLocal, for tests of the root and the agent in one process,
	// runs this machine's agent on the given end of its link instead of
	// starting an `ftlaunch agent` process.
	startLocal func(conn net.Conn) *localAgent
}

// localAgent is an agent on this machine, linked over a socketpair: an
// `ftlaunch agent` process, or (tests) a goroutine.
type localAgent struct {
	kill func()       // ends it at once
	wait func() error // waits until it ended
}

// Result is how a job ended.
type Result struct {
	ExitCode int
	// NodeTableAt is when every rank held the node table, measured from
	// Run's start (0 if the job never published one).
	NodeTableAt time.Duration
}

// frontend is the root of a local job. All its fields are owned by the
// goroutine running loop.
type frontend struct {
	opts     Options
	start    time.Time // when this root began (its timings count from here)
	jobStart time.Time // when the job began (a successor's began later)
	jobID    string

	agents []*agentHandle
	ranks  []rankState

	ctx    context.Context // Run's: ends every goroutine of the job
	events chan event      // what launches and links report to loop
	wg     sync.WaitGroup  // the root's goroutines (goFunc); joined before Run returns

	releaseTimer *time.Timer // lets the journal's replica start after the launch

	rootNode     string                  // where the root runs (live report)
	replicasDone map[string]bool         // replica agents joined (or failed to), by name
	endedAt      time.Time               // when the last rank ended
	plan         *plan.Plan              // the launch plan (nil: one local agent, or a successor's)
	topo         *topology.Tree          // the launch tree: who is whose parent, backup, child
	tree         bool                    // agents start agents (a plan, or a successor's rebuilt tree)
	launchTmpl   *launchSpec             // a successor's: how agents start theirs
	relaunch     func([]childSpec) error // a successor's: start root children
	ca           *secure.CA
	ln           net.Listener
	cancelLaunch context.CancelFunc
	launchBegan  time.Duration
	mapping      string // PMI_process_mapping
	journal      *journal.Journal
	journalDone  bool
	journalHold  chan struct{} // closed to let the journal's replica start
	holdOnce     sync.Once
	replicaNodes map[int]bool // agents hosting root replicas
	raftTr       *raft.NetworkTransport
	rootCreds    *secure.Credentials
	stage        *stagedProgram
	backupsUp    int
	replicaPeers []peerAddr // the replica agents, once all are up
	exitCode     int
	colls        map[uint64]*rootColl
	liveN        int // agents hosting ranks

	out         *outputWriter
	stdinAgent  *agentHandle
	stdinCredit chan struct{}

	ended       int
	shutdownAt  time.Time // when the job ended and agents were told to exit
	terminating bool
	rec         *recovery.Planner // decides what failures do to the job
	nodeTableAt time.Duration
	endSignal   syscall.Signal // the signal that ends the job (SIGINT, SIGTERM, SIGHUP), once received

	progress  bool // show a live launch line on stderr (a terminal)
	agentsUp  int  // agents that got their job
	ranksUp   int
	launching bool // the progress line is live
}

type agentHandle struct {
	idx     int
	name    string
	local   *localAgent   // the agent on this machine, on a socketpair
	sess    spawn.Session // an agent the front-end started in a launch tree
	link    *link         // the front-end's link to it, if it is a direct child
	via     *link         // the link it is reached through (set once up)
	ranks   []int
	up      bool   // connected and activated
	adopted bool   // a successor root took its link
	closed  bool   // link ended
	done    bool   // the agent reported mDone
	ended   int    // its ranks that ended
	outNext uint64 // its next output frame to write (0: not known yet, outq.go)

	rootChild bool // a child of the root: its link is the root's own

	info    childUp       // its start, as its launcher measured it
	upAt    time.Duration // when the front-end activated it
	specAt  time.Duration // when its job was sent
	ranksAt time.Duration // when its ranks were reported running
}

// send writes a message for the agent: on its link, or routed through the
// tree.
func (a *agentHandle) send(typ uint8, p []byte) error {
	if a.via == nil {
		return errors.New("agent not connected")
	}
	if a.rootChild {
		return a.via.send(typ, p)
	}
	return a.via.send(mRoute, wrap(a.idx, typ, p))
}

// kill ends the agent: a local one is killed, a remote one's session is
// closed (the agent sees its link end and kills its ranks).
func (a *agentHandle) kill() {
	switch {
	case a.local != nil:
		a.local.kill()
	case a.sess != nil:
		killSession(a.sess)
	}
}

// wait waits for the agent process or its session to end.
func (a *agentHandle) wait() {
	switch {
	case a.local != nil:
		_ = a.local.wait()
	case a.sess != nil:
		_ = a.sess.Wait()
	}
}

type rankState struct {
	node       int
	pid        int
	started    bool // reported running
	ended      bool
	status     rankStatus
	byFrontend bool // ended while ftlaunch was terminating the job
}

type rootColl struct {
	op     rankproto.Op
	from   map[int]bool // agents that contributed, by index
	got    int
	values [][]byte
	kv     map[string][]byte
}

// An event is what the root's goroutines report to its event loop: one of
// the ev* types below.
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
type evLaunched struct{ res launchResult }

// evReplicaDone: a replica agent joined the group (or will not).
type evReplicaDone struct{ name string }

// evAdopt: a successor root: a child of the lost root asks for adoption.
type evAdopt struct{ ac *adoptConn }

// evAdoptTimeout: a successor root: time is up for adoptions.
type evAdoptTimeout struct{}

// evResume: a successor root: start the root's children never started.
type evResume struct{}

func (evMessage) isRootEvent()      {}
func (evLinkEnd) isRootEvent()      {}
func (evLaunched) isRootEvent()     {}
func (evReplicaDone) isRootEvent()  {}
func (evAdopt) isRootEvent()        {}
func (evAdoptTimeout) isRootEvent() {}
func (evResume) isRootEvent()       {}

// groupHold is how long a replicated root's group waits for a short launch
// to finish before it starts anyway: a launch that takes longer can then
// survive the front-end's loss (its first election takes a few hundred
// milliseconds), and a short one does not share the CPU with it.
const groupHold = 100 * time.Millisecond

// Run launches the job on this machine and returns once every rank ended
// and every agent exited. Problems that prevent any rank from starting (an
// agent that cannot be spawned) are returned as errors.
func Run(ctx context.Context, opts Options) (Result, error) {
	if opts.N < 1 {
		return Result{ExitCode: ExitUsage}, fmt.Errorf("need at least one rank, got %d", opts.N)
	}
	if len(opts.Argv) == 0 {
		return Result{ExitCode: ExitUsage}, errors.New("no program given")
	}
	if err := checkApps(opts.Apps, opts.N); err != nil {
		return Result{ExitCode: ExitUsage}, err
	}
	if opts.Heartbeat == 0 {
		opts.Heartbeat = time.Second
	}
	if opts.KillAfter <= 0 {
		opts.KillAfter = 5 * time.Second
	}
	fe := &frontend{
		opts:  opts,
		start: time.Now(),
		jobID: newJobID(),
		colls: map[uint64]*rootColl{},
		out:   newOutputWriter(opts.Stdout, opts.Stderr, opts.Label),
		ranks: make([]rankState, opts.N),
		rec:   recovery.New(recovery.Config{Policy: recovery.None, Ranks: opts.N}),

		replicasDone: map[string]bool{},
	}
	go fe.out.run()
	defer fe.out.close()
	// Deferred calls run last-in first-out: the root's goroutines are
	// joined after its context was cancelled and the journal closed.
	defer fe.wg.Wait()
	defer func() {
		if fe.releaseTimer != nil {
			fe.releaseTimer.Stop()
		}
	}()
	jcfg, err := fe.journalConfig(ctx)
	if err != nil {
		return Result{ExitCode: ExitUsage}, err
	}
	fe.rootNode = jcfg.Node
	// The replica starts once the ranks' first exchange (node table, PMI
	// barrier) is done, or a moment after every rank runs, or when the
	// job fails: the launch does not share the CPU with it.
	fe.journalHold = make(chan struct{})
	jcfg.Hold = fe.journalHold
	j, err := journal.Open(ctx, jcfg)
	if err != nil {
		if fe.raftTr != nil {
			fe.raftTr.Close()
		}
		return Result{ExitCode: ExitLauncher}, fmt.Errorf("job state log: %w", err)
	}
	fe.journal = j
	if err := j.InMemory(); err != nil {
		fe.warnf("job state log: %v; keeping the job's state in memory (ftlaunch inspect and status will not know this job)", err)
	}
	defer fe.closeJournal()
	if opts.Replicas > 1 {
		// A root group can take over only once it exists: a launch that
		// lasts starts it early, while it goes on.
		t := time.AfterFunc(groupHold, fe.releaseJournal)
		defer t.Stop()
	}
	if opts.Prestage {
		st, err := readProgram(opts)
		if err != nil {
			return Result{ExitCode: ExitLauncher}, err
		}
		fe.stage = st
	}
	if opts.OutputDir != "" {
		if err := fe.out.openFiles(opts.OutputDir, opts.N); err != nil {
			return Result{ExitCode: ExitLauncher}, err
		}
	}
	fe.progress = !opts.Verbose && isTerminal(opts.Stderr)
	fe.launching = fe.progress
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, 256)
	fe.ctx, fe.events = ctx, events
	if err := fe.startAgents(ctx, events); err != nil {
		// The caller reports the error; the planner keeps it for the
		// final status.
		fe.exitCode = ExitLauncher
		fe.rec.Step(recovery.LaunchError{Msg: err.Error()})
		fe.killAgents()
		for _, a := range fe.agents {
			a.wait()
		}
		return Result{ExitCode: ExitLauncher}, err
	}
	fe.journalPlan()
	if fe.ln != nil {
		defer fe.ln.Close()
	}
	if fe.cancelLaunch != nil {
		defer fe.cancelLaunch()
	}
	code := fe.loop(ctx, events)
	fe.exitCode = code
	return Result{ExitCode: code, NodeTableAt: fe.nodeTableAt}, nil
}

func newJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "ft-" + hex.EncodeToString(b[:])
}

// nodeNames returns the names of the job's nodes on this machine.
func (fe *frontend) nodeNames() []string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	k := max(fe.opts.TestNodes, 1)
	if fe.opts.TestNodes <= 1 {
		return []string{host}
	}
	names := make([]string, k)
	for i := range names {
		names[i] = "node" + strconv.Itoa(i)
	}
	return names
}

// startAgents arranges the job's agents, one per node that runs ranks,
// and starts them: one local agent on a socketpair for a job on this
// machine; otherwise a launch tree (tree.go) over SSH, or over local
// processes posing as nodes (--test-nodes). Launches report to the event
// loop on events; startAgents does not wait for them.
func (fe *frontend) startAgents(ctx context.Context, events chan<- event) error {
	n := fe.opts.N
	pl := fe.opts.Placement
	if pl == nil {
		pl = blockPlacement(fe.nodeNames(), n)
	}
	fe.mapping = alloc.ProcessMapping(pl)
	for i, node := range pl.Nodes {
		a := &agentHandle{idx: i, name: node.Name, ranks: node.Ranks, outNext: 1}
		for _, r := range a.ranks {
			fe.ranks[r].node = i
		}
		if len(a.ranks) > 0 && a.ranks[0] == 0 {
			fe.stdinAgent = a
		}
		fe.agents = append(fe.agents, a)
	}
	fe.liveN = len(fe.agents)
	if fe.opts.SSH == nil && fe.opts.TestNodes <= 1 {
		fe.setTree(topology.Flat([]string{fe.agents[0].name}))
		a := fe.agents[0]
		if err := fe.spawnAgent(a); err != nil {
			return fmt.Errorf("start agent for node %s: %w", a.name, err)
		}
		fe.startReader(ctx, a, events)
		fe.agentUp(a, childUp{Idx: a.idx})
		return nil
	}
	if err := fe.arrangeTree(); err != nil {
		return err
	}
	if err := fe.issueRoot(); err != nil {
		return err
	}
	rootCreds := fe.rootCreds
	addr, hosts := ":0", []string(nil)
	sp := fe.opts.SSH
	switch {
	case sp == nil:
		ls, err := newLocalSpawner()
		if err != nil {
			return err
		}
		addr, hosts, sp = "127.0.0.1:0", []string{"127.0.0.1"}, ls
	case fe.opts.Launcher == "slurm":
		hosts = ownAddrs() // srun says nothing of where its caller is
	}
	ln, err := secure.Listen(ctx, "tcp", addr, rootCreds)
	if err != nil {
		return fmt.Errorf("listen for agents: %w", err)
	}
	fe.ln = ln
	children, err := fe.childSpecs(fe.topo.Children(topology.Root))
	if err != nil {
		return err
	}
	batch := 0
	if fe.plan.IsLeafLauncher(0) {
		batch = fe.opts.Batch
	}
	argv := []string{fe.opts.AgentPath, "agent", "--connect"}
	l := newLauncher(sp, argv, ln.Addr().(*net.TCPAddr).Port, hosts, batch, children)
	l.logf = func(format string, args ...any) { fe.out.message(fmt.Sprintf(format, args...) + "\n") }
	if g, ok := sp.(groupSpawner); ok && fe.opts.GroupStart {
		l.group = g
	}
	fe.goFunc(func() {
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		acceptLoop(ln, l, nil, nil)
	})
	lctx, cancel := context.WithCancel(ctx)
	fe.cancelLaunch = cancel
	fe.launchBegan = time.Since(fe.start)
	fe.goFunc(func() { l.run(lctx, fe.launched(ctx)) })
	fe.verbosef("launching %d agent(s) for %d rank(s): %s tree of depth %d", len(fe.agents), n, fe.plan.Kind, fe.plan.Depth())
	return nil
}

// The launch-time model's parameters for test nodes (agents started as
// local processes): a fork and exec per child, and about 10 ms until an
// agent runs and has connected back (--verbose on the 2-core development
// machine: 0.5-3 ms per start, connected 8-12 ms after its launcher began).
const (
	localSeq = time.Millisecond
	localRem = 10 * time.Millisecond
)

// arrangeTree builds the launch plan over the front-end (plan node 0) and
// the agents (agent i is plan node i+1).
func (fe *frontend) arrangeTree() error {
	kind, err := plan.ParseKind(cmp.Or(fe.opts.Tree, "auto"))
	if err != nil {
		return fmt.Errorf("--tree: %w", err)
	}
	if fe.opts.Launcher == "slurm" && fe.opts.GroupStart && kind.Shape != plan.Flat {
		// One step for every agent: the front-end starts them all.
		fe.verbosef("--slurm-start group: the front-end starts every agent (a flat tree)")
		kind, _ = plan.ParseKind("flat")
	}
	params := plan.Params{Replicas: max(fe.opts.Replicas, 1)}
	switch {
	case kind.Shape != plan.Auto:
	case fe.opts.SSH == nil:
		// Test nodes: a local process start, not the model's defaults
		// (which are a remote launch's and made a deeper tree, 3-4x
		// slower for a few test nodes).
		params.Calibration = &plan.Calibration{Seq: localSeq.Seconds(), Rem: localRem.Seconds()}
	default:
		if c, err := LoadCalibration(fe.opts.Launcher); err == nil && c != nil {
			params.Calibration = &plan.Calibration{Seq: c.Seq, Rem: c.Rem}
		}
	}
	pl, err := plan.Build(kind, len(fe.agents)+1, params)
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
func (fe *frontend) childSpecs(idx []int) ([]childSpec, error) {
	cs := make([]childSpec, 0, len(idx))
	for _, i := range idx {
		a := fe.agents[i]
		creds, err := fe.ca.Issue(a.name)
		if err != nil {
			return nil, fmt.Errorf("credentials for %s: %w", a.name, err)
		}
		cs = append(cs, childSpec{Idx: i, Name: a.name, Creds: creds.Marshal(), Sub: fe.topo.Subtree(i)})
	}
	return cs, nil
}

// startReader reads a direct child's link and passes its messages to the
// event loop.
func (fe *frontend) startReader(ctx context.Context, a *agentHandle, events chan<- event) {
	fe.goFunc(func() {
		err := a.link.run(ctx, fe.opts.Heartbeat, linkTimeout(fe.opts.Heartbeat), func(typ uint8, p []byte) error {
			select {
			case events <- evMessage{agent: a, typ: typ, p: p}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		select {
		case events <- evLinkEnd{agent: a, err: err}:
		case <-ctx.Done():
		}
	})
}

// agentUp sends an agent that connected back its share of the job, or,
// when the job is already over, tells it to exit.
func (fe *frontend) agentUp(a *agentHandle, up childUp) {
	if a.up || a.closed {
		return
	}
	a.up, a.info, a.upAt = true, up, time.Since(fe.start)
	if a.rootChild {
		a.via = a.link
	} else {
		a.via = fe.agents[fe.topo.Top(a.idx)].link
	}
	if fe.rec.Ending() {
		_ = a.send(mShutdown, nil)
		return
	}
	spec := &nodeSpec{
		JobID: fe.jobID, Argv: fe.opts.Argv, Env: fe.opts.Env, Wdir: fe.opts.Wdir,
		Size: fe.opts.N, KillAfter: fe.opts.KillAfter, Heartbeat: fe.opts.Heartbeat,
		Node: a.name, NodeID: a.idx, Ranks: a.ranks, ProcessMapping: fe.mapping,
		Apps: fe.opts.Apps, Bind: fe.opts.Bind, BindShare: fe.opts.BindShare,
	}
	if fe.stage != nil {
		spec.Prestage = true
		if a.rootChild { // deeper agents get it from their parent
			if err := sendPrestaged(a.send, fe.stage.name, fe.stage.mode, bytes.NewReader(fe.stage.data), int64(len(fe.stage.data))); err != nil {
				fe.step(recovery.LaunchError{Node: a.name, Msg: fmt.Sprintf("prestage to node %s: %v", a.name, err)})
				return
			}
		}
	}
	if fe.replicaNodes[a.idx] {
		spec.Replica = fe.replicaSpec()
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
	if err := a.send(mSpec, spec.encode()); err != nil {
		fe.step(recovery.LaunchError{Node: a.name, Msg: fmt.Sprintf("send the job to node %s: %v", a.name, err)})
		return
	}
	a.specAt = time.Since(fe.start)
	now := time.Now()
	fe.journal.AgentUp(journal.AgentUp{Node: a.name, Addr: up.Addr, Launched: now.Add(-up.Up), SSH: up.SSH, Connected: now, Start: fe.startedBy()})
	fe.agentsUp++
	fe.showProgress()
	switch {
	case a.local != nil:
		fe.verbosef("node %s: agent up (a local process on a socket pair)", a.name)
	case a.rootChild || fe.opts.Verbose:
		fe.verbosef("node %s: agent up (%s %.1f ms, %d attempt(s), connected %.1f ms after its launcher began)", a.name, fe.startedBy(), ms(up.SSH), up.Attempts, ms(up.Up))
	}
	// A replicated root's children learn where the replica agents are:
	// one of them adopts them if the front-end dies.
	if len(fe.replicaNodes) > 0 {
		if fe.replicaPeers == nil && fe.replicaNodes[a.idx] {
			var ps []peerAddr
			for i := range fe.replicaNodes {
				if b := fe.agents[i]; b.up && b.info.Addr != "" {
					ps = append(ps, peerAddr{Idx: i, Name: b.name, Addr: b.info.Addr})
				}
			}
			if len(ps) == len(fe.replicaNodes) {
				fe.replicaPeers = ps
				for _, b := range fe.agents {
					if b.rootChild && b.up && !b.closed {
						_ = b.send(mReplicas, encodePeers(ps))
					}
				}
			}
		} else if fe.replicaPeers != nil && a.rootChild {
			_ = a.send(mReplicas, encodePeers(fe.replicaPeers))
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
}

func (fe *frontend) sendBackup(a *agentHandle) {
	b := fe.agents[fe.topo.Backup(a.idx)]
	if b.info.Addr == "" || b.closed {
		return
	}
	_ = a.send(mBackup, peerAddr{Idx: b.idx, Name: b.name, Addr: b.info.Addr}.encode())
}

// replicaSpec is what a replica agent is given: enough to take the root
// over, also in the middle of the launch.
func (fe *frontend) replicaSpec() replicaSpec {
	rs := replicaSpec{JobDir: fe.journal.Dir(), Replicas: fe.opts.Replicas}
	if fe.ca != nil {
		rs.CA = fe.ca.Marshal()
	}
	for _, b := range fe.agents {
		rs.Placement = append(rs.Placement, b.ranks)
	}
	return rs
}

// launchSpec tells agent a how to start its children.
func (fe *frontend) launchSpec(a *agentHandle) launchSpec {
	l := launchSpec{Mode: "local", AgentPath: fe.opts.AgentPath}
	switch {
	case fe.launchTmpl != nil: // a successor: as it was told itself
		l = *fe.launchTmpl
	case fe.opts.Launcher == "slurm":
		l.Mode = "slurm"
	case fe.opts.SSH != nil:
		l.Mode, l.SSHConfig, l.AcceptNew, l.ForwardAgent = "ssh", fe.opts.SSHConfig, fe.opts.SSHAcceptNew, fe.opts.SSHForwardAgent
	}
	l.Batch = 0
	if fe.topo.LeafLauncher(a.idx) {
		l.Batch = fe.opts.Batch
	}
	return l
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// launchReport runs once every agent is up: it keeps the calibration and,
// with --verbose, prints the launch's breakdown per launching agent.
func (fe *frontend) launchReport() {
	if fe.opts.SSH != nil && !fe.opts.GroupStart { // SSH and srun launches calibrate their model
		fe.calibrate()
	}
	if !fe.opts.Verbose {
		return
	}
	report := func(name string, init time.Duration, kids []int, ranksAfter string) {
		if len(kids) == 0 {
			return
		}
		var sum, mx, q, last time.Duration
		for _, k := range kids {
			u := fe.agents[k].info
			sum += u.SSH
			mx, q, last = max(mx, u.SSH), max(q, u.Queued), max(last, u.Up)
		}
		fe.verbosef("launcher %s: init %.1f ms; %d child(ren): %s %.1f ms mean, %.1f ms max (%.1f ms queued max); all connected %.1f ms after it began launching%s",
			name, ms(init), len(kids), fe.startedBy(), ms(sum/time.Duration(len(kids))), ms(mx), ms(q), ms(last), ranksAfter)
	}
	report("front-end", fe.launchBegan, fe.topo.Children(topology.Root), "")
	for _, a := range fe.agents {
		ranks := ""
		if a.ranksAt > 0 {
			ranks = fmt.Sprintf("; its ranks running %.1f ms after its job arrived", ms(a.ranksAt-a.specAt))
		}
		report(a.name, a.info.Init, fe.topo.Children(a.idx), ranks)
	}
}

// startedBy names how the job's agents are started, as --verbose and the
// state log say it: an SSH session, an srun step, or a local process (test
// nodes, or the one agent of a job on this machine).
func (fe *frontend) startedBy() string {
	switch {
	case fe.opts.SSH == nil:
		return journal.StartProcess
	case fe.opts.Launcher == "slurm":
		return journal.StartSrun
	}
	return journal.StartSSH
}

// launchFailed handles an agent that could not be started: it and the
// agents below it never run, and the job fails (unless it is already
// ending).
func (fe *frontend) launchFailed(a *agentHandle, msg string) {
	if a.closed || a.up {
		return
	}
	for _, x := range append([]int{a.idx}, fe.topo.Subtree(a.idx)...) {
		b := fe.agents[x]
		if b.closed {
			continue
		}
		b.closed = true
		fe.abandonRanks(b, "never started: "+msg)
		for _, r := range b.ranks { // the launch failure itself is the report
			fe.ranks[r].byFrontend = true
		}
	}
	fe.step(recovery.LaunchFailed{Node: a.name, Msg: msg})
}

// abandonRanks counts the ranks of an agent that is gone as ended.
func (fe *frontend) abandonRanks(a *agentHandle, reason string) {
	for _, r := range a.ranks {
		rs := &fe.ranks[r]
		if rs.pid > 0 && a.local != nil { // pids are meaningful on this machine only
			_ = syscall.Kill(-rs.pid, syscall.SIGKILL)
		}
		if !rs.ended {
			rs.ended = true
			rs.byFrontend = fe.rec.Ending()
			rs.status = rankStatus{Rank: r, Code: ExitLauncher, Reason: reason}
			fe.journal.RankExited(journal.RankExit{Rank: r, Code: ExitLauncher, Reason: reason})
			fe.ended++
			a.ended++
		}
	}
}

// blockPlacement places n ranks on the named nodes in blocks of
// ceil(n/len(names)), as mpirun does on one host per node.
func blockPlacement(names []string, n int) *alloc.Placement {
	per := (n + len(names) - 1) / len(names)
	pl := &alloc.Placement{Ranks: make([]alloc.RankPlace, n)}
	for i, name := range names {
		lo, hi := i*per, min(n, (i+1)*per)
		if lo >= hi {
			break
		}
		node := alloc.NodePlace{Name: name}
		for r := lo; r < hi; r++ {
			node.Ranks = append(node.Ranks, r)
			pl.Ranks[r] = alloc.RankPlace{Node: len(pl.Nodes), LocalRank: r - lo, LocalSize: hi - lo}
		}
		pl.Nodes = append(pl.Nodes, node)
	}
	return pl
}

// spawnAgent starts an agent process with its link on file descriptor 3.
// The agent runs in its own process group, so a terminal's signals reach
// only the front-end, which forwards them.
func (fe *frontend) spawnAgent(a *agentHandle) error {
	conn, theirs, err := socketPair()
	if err != nil {
		return fmt.Errorf("agent link: %w", err)
	}
	defer theirs.Close()
	if fe.opts.startLocal != nil {
		c, err := net.FileConn(theirs)
		if err != nil {
			conn.Close()
			return fmt.Errorf("agent link: %w", err)
		}
		a.local, a.link = fe.opts.startLocal(c), newLink(conn)
		return nil
	}
	cmd := exec.Command(fe.opts.AgentPath, "agent")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = fe.opts.Stderr
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return err
	}
	a.local = &localAgent{kill: func() { _ = cmd.Process.Kill() }, wait: cmd.Wait}
	a.link = newLink(conn)
	return nil
}

// loop is the front-end's event loop: it owns all job state.
func (fe *frontend) loop(ctx context.Context, events <-chan event) int {
	var timeout <-chan time.Time
	if fe.opts.Timeout > 0 {
		t := time.NewTimer(fe.opts.Timeout - time.Since(fe.start))
		defer t.Stop()
		timeout = t.C
	}
	if fe.stdinAgent != nil && fe.opts.Stdin != nil {
		fe.stdinCredit = make(chan struct{}, 4)
		for range cap(fe.stdinCredit) {
			fe.stdinCredit <- struct{}{}
		}
		go fe.forwardStdin(ctx, fe.stdinAgent)
	}
	var shutdownTimer, settle <-chan time.Time
	liveTick := time.NewTicker(liveInterval)
	defer liveTick.Stop()
	for !fe.allAgentsGone() {
		select {
		case ev := <-events:
			fe.handle(ev)
		case <-liveTick.C:
			fe.writeLive()
		case <-settle:
		case sig := <-fe.opts.Signals:
			fe.onSignal(sig)
		case <-timeout:
			fe.step(recovery.TimedOut{Limit: fe.opts.Timeout})
		case <-shutdownTimer:
			fe.warnf("agents did not exit after the job ended; killing them")
			fe.killAgents()
			shutdownTimer = nil
		case <-ctx.Done():
			fe.killAgents()
			return ExitLauncher
		}
		if fe.ended == fe.opts.N && fe.shutdownAt.IsZero() {
			if !fe.replicasSettled() {
				settle = time.After(50 * time.Millisecond) // look again
				continue
			}
			// The job's end is committed while every replica still runs.
			fe.closeJournal()
			fe.shutdown()
			shutdownTimer = time.After(5 * time.Second)
		}
	}
	// Sessions of agents that finished end at once. A lost agent's may
	// not: srun cancelling a step on a dead node can take tens of seconds.
	// Those get a bounded wait; what is left of them goes with this
	// process (srun and ssh sessions die with their parent).
	lost := time.After(2 * time.Second)
	for _, a := range fe.agents {
		if a.done || a.local != nil {
			a.wait()
			continue
		}
		ended := make(chan struct{})
		go func() {
			a.wait()
			close(ended)
		}()
		select {
		case <-ended:
		case <-lost:
		}
	}
	return fe.finish()
}

// replicasSettled reports whether the job's end can be committed: every
// replica agent that is up has joined the group (or failed to), so that
// the final status is on all of them — a short job ends before its
// replica agents started theirs. It gives up waiting after 10 s.
func (fe *frontend) replicasSettled() bool {
	if fe.endedAt.IsZero() {
		fe.endedAt = time.Now()
	}
	for i := range fe.replicaNodes {
		if a := fe.agents[i]; !a.closed && !a.done && !fe.replicasDone[a.name] {
			if time.Since(fe.endedAt) > 10*time.Second {
				fe.warnf("job state log: root replicas still joining the group after 10 s; committing the final status without them")
				return true
			}
			fe.releaseJournal() // they join once the front-end's replica leads
			return false
		}
	}
	return true
}

func (fe *frontend) allAgentsGone() bool {
	for _, a := range fe.agents {
		if !a.closed {
			return false
		}
	}
	return true
}

func (fe *frontend) shutdown() {
	fe.step(recovery.Finished{})
	fe.bcast(mShutdown, nil)
	fe.shutdownAt = time.Now()
	if fe.cancelLaunch != nil {
		fe.cancelLaunch()
	}
}

// bcast sends a message to every agent: each direct child forwards it to
// its subtree.
func (fe *frontend) bcast(typ uint8, p []byte) {
	var ls []*link
	for _, a := range fe.agents {
		if a.rootChild && a.link != nil && !a.closed && !a.done {
			ls = append(ls, a.link)
		}
	}
	if len(ls) > 0 {
		sendEach(ls, mBcast, wrap(-1, typ, p))
	}
}

// linkEnded handles the end of an agent's link (told by the link itself,
// or by its parent agent): it and the agents below it are gone.
func (fe *frontend) linkEnded(a *agentHandle, err error) {
	if a.closed {
		return
	}
	// Every agent lost here and its ranks are counted before the planner
	// hears of the loss: the ranks of the subtree failed with it, they
	// are not ended by the termination that follows.
	type loss struct {
		a   *agentHandle
		err error
	}
	var lost []loss
	for _, x := range append([]int{a.idx}, fe.topo.Subtree(a.idx)...) {
		b := fe.agents[x]
		if b.closed && b != a {
			continue
		}
		b.closed = true
		if b.done {
			continue
		}
		why := err
		if b != a {
			why = fmt.Errorf("lost with %s above it in the launch tree", a.name)
		}
		fe.abandonRanks(b, "lost with its agent")
		b.kill()
		lost = append(lost, loss{b, why})
	}
	for _, l := range lost {
		fe.step(recovery.AgentLost{Node: l.a.name, Err: l.err.Error()})
	}
}

func (fe *frontend) handle(ev event) {
	switch ev := ev.(type) {
	case evMessage:
		fe.message(ev.agent, ev.typ, ev.p)
	case evLinkEnd:
		fe.linkEnded(ev.agent, ev.err)
	case evLaunched:
		r := ev.res
		a := fe.agents[r.child.Idx]
		if r.err != nil {
			fe.launchFailed(a, r.err.Error())
			return
		}
		a.link, a.sess = r.link, r.sess
		fe.startReader(fe.ctx, a, fe.events)
		fe.agentUp(a, r.up)
	case evReplicaDone:
		fe.replicasDone[ev.name] = true
	case evAdopt:
		fe.adopt(ev.ac)
	case evAdoptTimeout:
		fe.adoptTimedOut()
	case evResume:
		fe.resumeLaunch()
	default:
		panic(fmt.Sprintf("launch: root event %T not handled", ev))
	}
}

// message handles one message of agent a.
func (fe *frontend) message(a *agentHandle, typ uint8, p []byte) {
	switch typ {
	case mFrom:
		src, typ, p, err := unwrap(p, true)
		if err != nil || src < 0 || src >= len(fe.agents) || fe.topo.Top(src) != a.idx || src == a.idx || typ == mFrom {
			fe.protocolError(a, fmt.Errorf("relayed message from agent %d: %v", src, err))
			return
		}
		fe.message(fe.agents[src], typ, p)
	case mChildUp:
		up, err := decodeChildUp(p)
		if err != nil || !slices.Contains(fe.topo.Children(a.idx), up.Idx) {
			fe.protocolError(a, fmt.Errorf("child up: %v", err))
			return
		}
		fe.agentUp(fe.agents[up.Idx], up)
	case mChildFailed, mChildGone:
		cf, err := decodeChildFailed(p)
		if err != nil || !slices.Contains(fe.topo.Children(a.idx), cf.Idx) {
			fe.protocolError(a, fmt.Errorf("child report: %v", err))
			return
		}
		c := fe.agents[cf.Idx]
		if typ == mChildFailed {
			fe.launchFailed(c, cf.Msg)
		} else {
			fe.linkEnded(c, errors.New(cf.Msg))
		}
	case mBackupUp:
		fe.backupsUp++
	case mReplicaUp:
		ru, err := decodeReplicaUp(p)
		if err != nil || !fe.replicaNodes[a.idx] || ru.Name != a.name {
			fe.protocolError(a, fmt.Errorf("replica up: %v", err))
			return
		}
		if ru.Addr == "" { // its replica could not start
			fe.warnf("root replica on %s did not start; the state log has one replica less", ru.Name)
			fe.replicasDone[ru.Name] = true
			return
		}
		fe.addReplica(ru)
	case mStarted:
		st, err := decodeStarted(p)
		if err != nil {
			fe.protocolError(a, err)
			return
		}
		var fresh started // not heard of before (a successor hears of ranks again)
		for i, r := range st.Ranks {
			if r >= 0 && r < len(fe.ranks) {
				rs := &fe.ranks[r]
				rs.pid = st.Pids[i]
				if rs.node < 0 { // a successor learns where it runs
					rs.node = a.idx
					a.ranks = append(a.ranks, r)
				}
				if !rs.started {
					rs.started = true
					fe.ranksUp++
					fresh.Ranks, fresh.Pids = append(fresh.Ranks, r), append(fresh.Pids, st.Pids[i])
				}
			}
		}
		if len(fresh.Ranks) == 0 {
			return
		}
		for i, cpus := range st.CPUs {
			fe.verbosef("rank %d on %s bound to CPUs %s (--bind-to %s)", st.Ranks[i], a.name, cpus, fe.opts.Bind)
		}
		a.ranksAt = time.Since(fe.start)
		if fe.ranksUp >= fe.opts.N && fe.releaseTimer == nil {
			fe.releaseTimer = time.AfterFunc(250*time.Millisecond, fe.releaseJournal)
		}
		fe.journal.RanksStarted(a.name, fresh.Ranks, fresh.Pids)
		fe.showProgress()
		fe.verbosef("node %s: %d rank(s) running", a.name, len(st.Ranks))
	case mOutput:
		seq, r, stream, data, err := decodeOutput(p)
		if err != nil || r >= len(fe.ranks) {
			fe.protocolError(a, fmt.Errorf("output message: %v", err))
			return
		}
		if !a.takeOutput(seq) {
			return // a copy, or sent again after a failover (outq.go)
		}
		fe.out.push(outItem{agent: a, seq: seq, rank: r, stream: stream, data: data})
	case mOutputResync:
		first, err := decodeSeq(p)
		if err != nil || first == 0 {
			fe.protocolError(a, fmt.Errorf("output resync: %v", err))
			return
		}
		a.outputResync(first)
	case mExit:
		st, err := decodeRankStatus(p)
		if err != nil {
			fe.protocolError(a, fmt.Errorf("exit message: %w", err))
			return
		}
		if st.Rank >= len(fe.ranks) || fe.rec.Ended(st.Rank) {
			// A rank that does not exist, or reported again: the planner
			// tells a protocol error from evidence repeated after a failover.
			fe.step(recovery.RankExited{Rank: st.Rank, Node: a.name, Code: st.Code, Signal: st.Signal, Reason: st.Reason})
			return
		}
		fe.rankEnded(st)
	case mAbort:
		ab, err := decodeAbort(p)
		if err != nil || ab.Rank >= len(fe.ranks) {
			fe.protocolError(a, fmt.Errorf("abort message: %v", err))
			return
		}
		fe.step(recovery.RankAborted{Rank: ab.Rank, Node: fe.nodeOf(ab.Rank), Code: ab.Code, Msg: ab.Msg, Failed: ab.Failed})
	case mContrib:
		c, err := decodeContrib(p)
		if err != nil {
			fe.protocolError(a, err)
			return
		}
		fe.contribute(a, c)
	case mStdinAck:
		if fe.stdinCredit != nil {
			select {
			case fe.stdinCredit <- struct{}{}:
			default:
			}
		}
	case mDone:
		a.done = true
		if st, err := decodeNodeStats(p); err == nil && st.PMI.Requests > 0 {
			fe.verbosef("node %s: PMI %d requests (%d puts, %d gets, %d barriers) answered on the node, %d B in / %d B out; %d B sent up in %d barrier(s)",
				a.name, st.PMI.Requests, st.PMI.Puts, st.PMI.Gets, st.PMI.Barriers, st.PMI.BytesIn, st.PMI.BytesOut, st.PMIUp, st.Barrier)
		}
	default:
		fe.protocolError(a, fmt.Errorf("unknown message type %d", typ))
	}
}

// showProgress updates the live launch line: agents up, ranks running.
// The line goes once every rank runs (or the job fails); it is never shown
// when stderr is not a terminal. Launch goroutines call it before the
// event loop starts (ordered by the launch's result channel), the loop
// after.
func (fe *frontend) showProgress() {
	if !fe.launching {
		return
	}
	if fe.ranksUp >= fe.opts.N || fe.rec.Failure() != nil {
		fe.launching = false
		fe.out.push(outItem{progress: true})
		return
	}
	fe.out.push(outItem{progress: true, data: []byte(fmt.Sprintf("ftlaunch: %d/%d agents up, %d/%d ranks running",
		fe.agentsUp, len(fe.agents), fe.ranksUp, fe.opts.N))})
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (fe *frontend) nodeOf(rank int) string {
	if n := fe.ranks[rank].node; n >= 0 {
		return fe.agents[n].name
	}
	return "?"
}

func (fe *frontend) warnf(format string, args ...any) {
	fe.out.message(fmt.Sprintf("ftlaunch: "+format+"\n", args...))
}

func (fe *frontend) verbosef(format string, args ...any) {
	if fe.opts.Verbose {
		fe.warnf("[%7.3fs] "+format, append([]any{time.Since(fe.start).Seconds()}, args...)...)
	}
}

// rankEnded records a rank's end; the planner decides what a failure
// does to the job.
func (fe *frontend) rankEnded(st rankStatus) {
	rs := &fe.ranks[st.Rank]
	rs.ended, rs.status = true, st
	fe.journal.RankExited(journal.RankExit{Rank: st.Rank, Code: st.Code, Signal: st.Signal, Reason: st.Reason})
	// A rank killed by the termination ftlaunch started is not a failure
	// of its own; one that exits with an error code meanwhile is.
	rs.byFrontend = fe.rec.Ending() && (st.Signal == int(syscall.SIGTERM) || st.Signal == int(syscall.SIGKILL) ||
		fe.endSignal != 0 && st.Signal == int(fe.endSignal)) || st.Skipped
	fe.ended++
	if rs.node >= 0 {
		fe.agents[rs.node].ended++
	}
	ev := exitEvent(st, fe.nodeOf(st.Rank))
	fe.step(ev)
	if ev.Clean() {
		fe.checkStranded()
	}
}

// exitEvent is a rank's end as the planner takes it.
func exitEvent(st rankStatus, node string) recovery.RankExited {
	return recovery.RankExited{Rank: st.Rank, Node: node, Code: st.Code, Signal: st.Signal, Reason: st.Reason}
}

func describe(st rankStatus) string { return exitEvent(st, "").Describe() }

// checkStranded fails the job when a node whose ranks have all ended never
// gave its part to a collective the other nodes are waiting in: the wait
// would last forever. (A node with ranks left reports its own stranded
// collectives: see Agent.contribute.)
func (fe *frontend) checkStranded() {
	if fe.rec.Ending() || len(fe.colls) == 0 {
		return
	}
	for seq, rc := range fe.colls {
		for _, b := range fe.agents {
			if len(b.ranks) > 0 && b.ended == len(b.ranks) && !rc.from[b.idx] {
				fe.step(recovery.Stranded{Seq: seq, Node: b.name, Op: rc.op.String()})
				return
			}
		}
	}
}

// step gives the failure planner an event and carries out what it
// decides, in order.
func (fe *frontend) step(ev recovery.Event) {
	acts := fe.rec.Step(ev)
	for _, act := range acts {
		switch act := act.(type) {
		case recovery.Record:
			fe.releaseJournal()
			rank := act.Rank
			if rank == recovery.NoRank {
				rank = raftstore.NoRank
			}
			fe.journal.Failure(journal.Failure{Node: act.Node, Rank: rank, Message: act.Msg})
		case recovery.Report:
			fe.showProgress() // clears the launch line
			fe.warnf("%s", act.Msg)
		case recovery.Terminate:
			fe.terminate()
		default:
			panic(fmt.Sprintf("launch: recovery action %T not carried out", act))
		}
	}
	if len(acts) > 0 {
		fe.writeLive()
	}
}

func (fe *frontend) terminate() {
	if fe.terminating {
		return
	}
	fe.terminating = true
	fe.verbosef("terminating the job: SIGTERM to every rank, SIGKILL after %v", fe.opts.KillAfter)
	if fe.cancelLaunch != nil {
		fe.cancelLaunch()
	}
	fe.bcast(mTerminate, encodeInt(int64(fe.opts.KillAfter)))
}

// onSignal forwards a signal to every rank. SIGINT, SIGTERM and SIGHUP end
// the job, as mpiexec's do: the signal goes to every rank, then SIGTERM,
// then SIGKILL after --kill-after, and the job's exit status is 128 plus
// the signal's number; the same signal again, or another of the three,
// kills every rank at once. Other signals (SIGUSR1, SIGUSR2, SIGCONT) are
// only forwarded.
func (fe *frontend) onSignal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok {
		return
	}
	ends := s == syscall.SIGINT || s == syscall.SIGTERM || s == syscall.SIGHUP
	switch {
	case ends && !fe.shutdownAt.IsZero():
		return // every rank ended already: the job's end stands
	case s == syscall.SIGHUP && fe.opts.Replicas > 1 && fe.opts.Detach != nil && !fe.terminating:
		if fe.groupReady() {
			fe.opts.Detach(fe.jobID) // does not return
			return
		}
		fe.warnf("SIGHUP before the root replicas are up: the job cannot go on without the front-end")
	case ends && fe.terminating:
		fe.warnf("%s again: killing every rank", unix.SignalName(s))
		fe.bcast(mKill, nil)
		return
	}
	fe.verbosef("forwarding signal %d (%v) to every rank", int(s), s)
	fe.bcast(mSignal, encodeInt(int64(s)))
	if ends {
		fe.endSignal = s
		fe.step(recovery.Signaled{Signal: int(s), Msg: fmt.Sprintf("%s: ending the job (%s to every rank, then SIGTERM, SIGKILL after %v; %s again kills at once)",
			unix.SignalName(s), unix.SignalName(s), fe.opts.KillAfter, unix.SignalName(s))})
	}
}

// groupReady reports whether a replicated root's group has every replica
// and the root's children know where the replicas are: the job survives
// the front-end.
func (fe *frontend) groupReady() bool {
	r := fe.journal.Replica()
	if r == nil || fe.replicaPeers == nil {
		return false
	}
	f := r.Raft().GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) >= fe.opts.Replicas
}

func (fe *frontend) protocolError(a *agentHandle, err error) {
	fe.step(recovery.ProtocolError{Node: a.name, Err: err.Error()})
}

// contribute merges a node's contribution; when every node has given its
// part, the result goes down to every node.
func (fe *frontend) contribute(a *agentHandle, c *contrib) {
	rc := fe.colls[c.Seq]
	if rc == nil {
		rc = &rootColl{op: c.Op, kv: map[string][]byte{}, from: map[int]bool{}}
		if c.Op != rankproto.OpBarrier && !isKVOp(c.Op) {
			rc.values = make([][]byte, fe.opts.N)
		}
		fe.colls[c.Seq] = rc
	}
	if rc.op != c.Op {
		fe.step(recovery.CollectiveMismatch{Seq: c.Seq, Node: a.name, Op: c.Op.String(), Want: rc.op.String()})
		return
	}
	if rc.from[a.idx] {
		return // reported again after a failover
	}
	for i, r := range c.Ranks {
		if rc.values != nil && r < len(rc.values) {
			rc.values[r] = c.Values[i]
		}
	}
	for k, v := range c.KV {
		rc.kv[k] = v
	}
	rc.got++
	rc.from[a.idx] = true
	if rc.got < fe.liveN {
		fe.checkStranded()
		return
	}
	delete(fe.colls, c.Seq)
	res := &collResult{Seq: c.Seq, Op: c.Op, Values: rc.values}
	if isKVOp(c.Op) {
		res.KV = rc.kv
	}
	fe.bcast(mCollResult, res.encode())
	fe.releaseJournal()
	if c.Op == rankproto.OpPublish && fe.nodeTableAt == 0 {
		fe.nodeTableAt = time.Since(fe.start)
		nodes := make([]string, len(fe.ranks))
		for r := range fe.ranks {
			nodes[r] = fe.nodeOf(r)
		}
		fe.journal.NodeTable(nodes, rc.values)
		fe.verbosef("node table of %d ranks published", fe.opts.N)
	}
}

// forwardStdin copies the front-end's stdin to rank 0 in chunks, with at
// most cap(stdinCredit) chunks unacknowledged.
func (fe *frontend) forwardStdin(ctx context.Context, a *agentHandle) {
	buf := make([]byte, 32<<10)
	for {
		select {
		case <-fe.stdinCredit:
		case <-ctx.Done():
			return
		}
		n, err := fe.opts.Stdin.Read(buf)
		if n > 0 {
			if a.send(mStdin, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			_ = a.send(mStdinClose, nil)
			return
		}
	}
}

func (fe *frontend) killAgents() {
	for _, a := range fe.agents {
		// An agent that got its job is told to shut down first, so that it
		// kills its ranks and exits quietly instead of reporting a lost
		// link.
		if a.rootChild && a.link != nil && !a.closed && a.link.send(mBcast, wrap(-1, mShutdown, nil)) == nil && a.local == nil {
			continue // a remote agent: closing its session now would race the shutdown
		}
		a.kill()
	}
	for _, rs := range fe.ranks {
		if rs.pid > 0 && !rs.ended && rs.node >= 0 && fe.agents[rs.node].local != nil {
			_ = syscall.Kill(-rs.pid, syscall.SIGKILL)
		}
	}
}

// finish prints the failure summary and returns the exit code.
func (fe *frontend) finish() int {
	if fe.plan != nil {
		fe.verbosef("launch tree: %s of depth %d over %d agent(s); %d of %d standby link(s) to backup parents were up",
			fe.plan.Kind, fe.plan.Depth(), len(fe.agents), fe.backupsUp, fe.backupLinks())
	}
	fe.verbosef("job ended")
	failure := fe.rec.Failure()
	if failure == nil {
		return 0
	}
	var failed []int
	for r, rs := range fe.ranks {
		st := rs.status
		if (st.Code != 0 || st.Signal != 0 || st.Reason != "") && !rs.byFrontend {
			failed = append(failed, r)
		}
	}
	if len(failed) > 1 {
		sort.Ints(failed)
		var b strings.Builder
		fmt.Fprintf(&b, "ftlaunch: %d ranks failed:\n", len(failed))
		for _, r := range failed {
			fmt.Fprintf(&b, "  rank %-6d node %-16s %s\n", r, fe.nodeOf(r), describe(fe.ranks[r].status))
		}
		fe.out.message(b.String())
	}
	return failure.Code
}

// backupLinks counts the standby links the plan asks for: one per agent
// whose backup parent is another agent.
func (fe *frontend) backupLinks() int {
	n := 0
	for _, a := range fe.agents {
		if fe.topo.Backup(a.idx) >= 0 {
			n++
		}
	}
	return n
}

// stagedProgram is the program file the front-end prestages.
type stagedProgram struct {
	name string
	mode os.FileMode
	data []byte
}

func readProgram(opts Options) (*stagedProgram, error) {
	path, err := ResolveProgram(opts.Argv[0], opts.Wdir, LookupEnv(opts.Env, "PATH"))
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(opts.Wdir, path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	if st.Size() > MaxPrestage {
		return nil, fmt.Errorf("--prestage: %s is %d bytes, more than the limit of %d", path, st.Size(), MaxPrestage)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--prestage: %w", err)
	}
	return &stagedProgram{name: filepath.Base(path), mode: st.Mode().Perm(), data: data}, nil
}

// journalPlan records the launch tree (or the single local agent).
func (fe *frontend) journalPlan() {
	if fe.plan == nil {
		names := make([]string, len(fe.agents))
		for i, a := range fe.agents {
			names[i] = a.name
		}
		fe.journal.Plan(journal.FlatPlan(names))
		return
	}
	p := journal.Plan{Kind: fe.plan.Kind.String(), Root: journal.RootName}
	for _, a := range fe.agents {
		n := journal.PlanNode{Name: a.name, Primary: journal.RootName}
		if p := fe.topo.Parent(a.idx); p >= 0 {
			n.Primary = fe.agents[p].name
		}
		if b := fe.topo.Backup(a.idx); b >= 0 {
			n.Backup = fe.agents[b].name
		}
		p.Nodes = append(p.Nodes, n)
	}
	fe.journal.Plan(p)
}

// closeJournal commits the job's final status and says where the state
// log is.
func (fe *frontend) closeJournal() {
	if fe.journalDone {
		return
	}
	fe.journalDone = true
	msg, code := "success", fe.exitCode
	if f := fe.rec.Failure(); f != nil {
		msg, code = f.Msg, f.Code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fe.journal.Close(ctx, code, msg); err != nil {
		fe.warnf("job state log: %v", err)
	}
	fe.removeLive()
	if fe.raftTr != nil {
		fe.raftTr.Close()
	}
	if (fe.opts.Verbose || fe.rec.Failure() != nil) && fe.journal.Dir() != "" {
		fe.warnf("job %s: state in %s (ftlaunch inspect)", fe.jobID, fe.journal.Dir())
	}
}

// releaseJournal lets the journal's replica start.
func (fe *frontend) releaseJournal() {
	fe.holdOnce.Do(func() { close(fe.journalHold) })
}

// issueRoot makes the job's CA and the front-end's credentials (once).
func (fe *frontend) issueRoot() error {
	if fe.ca != nil {
		return nil
	}
	ca, err := secure.NewJobCA(fe.jobID)
	if err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	creds, err := ca.Issue(rootName)
	if err != nil {
		return fmt.Errorf("job credentials: %w", err)
	}
	fe.ca, fe.rootCreds = ca, creds
	return nil
}

// journalConfig configures the job's state log: a single voter in the
// front-end, or with --replicas R the first of a group whose other
// members are agents, reached over TCP with the job's mutual TLS.
func (fe *frontend) journalConfig(ctx context.Context) (journal.Config, error) {
	host, _ := os.Hostname()
	r := max(fe.opts.Replicas, 1)
	cfg := journal.Config{
		StateDir: fe.opts.StateDir, Node: cmp.Or(host, "localhost"),
		Job: journal.Job{ID: fe.jobID, Argv: fe.opts.Argv, N: fe.opts.N, Start: fe.start, Replicas: r},
		// One replica, in the front-end, can keep the state in memory;
		// replica agents need its files.
		Fallback: r == 1,
	}
	if r == 1 {
		return cfg, nil
	}
	if r != 3 && r != 5 {
		return cfg, fmt.Errorf("--replicas must be 1, 3 or 5, got %d", r)
	}
	nodes := len(fe.nodeNames())
	if fe.opts.Placement != nil {
		nodes = len(fe.opts.Placement.Nodes)
	}
	if fe.opts.SSH == nil && fe.opts.TestNodes <= 1 || nodes < r-1 {
		return cfg, fmt.Errorf("--replicas %d needs %d nodes besides the front-end (hosts or --test-nodes), the job has %d", r, r-1, nodes)
	}
	if err := fe.issueRoot(); err != nil {
		return cfg, err
	}
	ip := "127.0.0.1"
	if fe.opts.SSH != nil {
		if addrs := ownAddrs(); len(addrs) > 0 {
			ip = addrs[0]
		}
	}
	layer, err := newRaftStream(ctx, fe.rootCreds, ip)
	if err != nil {
		return cfg, err
	}
	fe.raftTr = raftstore.NewTCPTransport(layer)
	names := fe.nodeNames()
	if fe.opts.Placement != nil {
		names = names[:0]
		for _, n := range fe.opts.Placement.Nodes {
			names = append(names, n.Name)
		}
	}
	if slices.Contains(names, cfg.Node) { // replica ids must differ from the agents'
		cfg.Node += "-root"
	}
	cfg.Transport, cfg.Timing = fe.raftTr, raftstore.DefaultTiming(r)
	return cfg, nil
}

// addReplica adds a replica agent to the group, from a goroutine: it
// waits for the front-end's replica to lead.
func (fe *frontend) addReplica(ru replicaUp) {
	fe.goFunc(func() {
		defer func() { // joined or not, the end need not wait for it
			select {
			case fe.events <- evReplicaDone{name: ru.Name}:
			case <-fe.ctx.Done():
			}
		}()
		ctx, cancel := context.WithTimeout(fe.ctx, 30*time.Second)
		defer cancel()
		if err := fe.journal.Ready(ctx); err != nil {
			fe.warnf("root replica on %s not added: %v", ru.Name, err)
			return
		}
		r := fe.journal.Replica()
		if r == nil {
			return
		}
		// A leadership blip (a loaded machine) fails a change: try again
		// while there is time.
		for {
			err := r.Raft().AddVoter(raft.ServerID(ru.Name), raft.ServerAddress(ru.Addr), 0, 10*time.Second).Error()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				fe.warnf("root replica on %s not added: %v", ru.Name, err)
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		fe.verbosef("root replica on %s joined the group (%s)", ru.Name, ru.Addr)
	})
}

// goFunc runs f on a goroutine the root owns: Run (or the successor's
// loop) joins it before returning, so f must end with the root's context.
func (fe *frontend) goFunc(f func()) {
	fe.wg.Add(1)
	go func() {
		defer fe.wg.Done()
		f()
	}()
}

// launched passes a start by the root's own launcher to the event loop;
// once the root's context ended, a session that started is closed.
func (fe *frontend) launched(ctx context.Context) func(launchResult) {
	return func(res launchResult) {
		select {
		case fe.events <- evLaunched{res: res}:
		case <-ctx.Done():
			if res.sess != nil {
				_ = res.sess.Close()
			}
		}
	}
}

// isSSH reports an SSH session: its Kill asks the server, which on a dead
// connection waits for TCP's timeout.
func isSSH(s spawn.Session) bool {
	_, ok := s.(sshSession)
	return ok
}
