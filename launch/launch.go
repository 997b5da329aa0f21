package launch

// The facade: a job's options, its result, and Run, which serves them with
// a root (root*.go) over agents (agent*.go).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/recovery"
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

	// Restart is what a failed rank costs the job (--restart): the job
	// (recovery.None, the default), the rank alone, started again as its
	// next incarnation (recovery.Rank), or a restart of every rank
	// (recovery.Job); MaxRestarts bounds the restarts, per rank under
	// Rank, per job under Job.
	Restart     recovery.Policy
	MaxRestarts int

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

	// AgentInProcess runs this machine's agent of a local launch in the
	// front-end's process where it can (agent_inproc.go): a Go process's
	// start less; a /bin/sh guard kills the ranks' process groups if the
	// front-end dies.
	AgentInProcess bool
}

// localHooks are how the root runs this machine's agent of a local launch
// in its own process, injected by the facade (the root does not import the
// agent).
type localHooks struct {
	// Run runs an agent on conn until the job ends or the link is lost
	// (Options.AgentInProcess); its ranks' process groups are given to
	// guard.
	Run func(ctx context.Context, conn net.Conn, log io.Writer, trace *phaseLog, guard func(pgid int)) error
	// Start, for tests of the root and the agent in one process, runs
	// this machine's agent on the given end of its link instead of
	// starting an `ftlaunch agent` process.
	Start func(conn net.Conn) *localAgent
}

// localAgent is an agent on this machine, linked over a socketpair: an
// `ftlaunch agent` process, or (tests) a goroutine.
type localAgent struct {
	kill      func()       // ends it at once
	wait      func() error // waits until it ended
	inProcess bool         // a goroutine of the front-end (agent_inproc.go)
}

// Result is how a job ended.
type Result struct {
	ExitCode int
	// NodeTableAt is when every rank held the node table, measured from
	// Run's start (0 if the job never published one).
	NodeTableAt time.Duration
}

// groupHold is how long a replicated root's group waits for a short launch
// to finish before it starts anyway: a launch that takes longer can then
// survive the front-end's loss (its first election takes a few hundred
// milliseconds), and a short one does not share the CPU with it.
const groupHold = 100 * time.Millisecond

// Run launches the job on this machine and returns once every rank ended
// and every agent exited. Problems that prevent any rank from starting (an
// agent that cannot be spawned) are returned as errors.
func Run(ctx context.Context, opts Options) (Result, error) {
	return runRoot(ctx, opts, localHooks{Run: func(ctx context.Context, conn net.Conn, log io.Writer, trace *phaseLog, guard func(int)) error {
		return runAgentTraced(ctx, conn, nil, log, trace, guard)
	}})
}

// runRoot serves a job from its front-end: the root's event loop over the
// agents it starts.
func runRoot(ctx context.Context, opts Options, local localHooks) (Result, error) {
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
		opts: opts, local: local,
		start: time.Now(),
		jobID: newJobID(),
		colls: map[uint64]*rootColl{}, answered: map[uint64]bool{},
		out:   newOutputWriter(opts.Stdout, opts.Stderr, opts.Label),
		ranks: make([]rankState, opts.N),
		rec:   recovery.New(recovery.Config{Policy: recovery.None, Ranks: opts.N}),

		recovered: map[int]uint64{}, holdAt: os.Getenv(holdEnv),

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
