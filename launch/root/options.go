package root

// A job's options and result, and the hooks the facade (launch) gives the
// root.

import (
	"io"
	"net"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Exit codes of ftlaunch itself (a rank's failure is reported with the
// rank's own code).
const (
	ExitLauncher = recovery.ExitLauncher // ftlaunch failed: an agent could not start or was lost
	ExitUsage    = 2                     // bad command line
	ExitTimeout  = recovery.ExitTimeout  // --timeout expired
)

// Options describe one job run from this machine. It has 34 fields, over
// the project's 30, because it is ftlaunch run's command line, one field
// per flag, plus the caller's I/O and the tests' knobs: grouping further
// would only rename flags.
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
	TestNodes int             // local agents posing as nodes; 0 or 1: one agent for this machine
	Agents    launcher.Agents // how the job's agents start
	// Apps lists the programs of an MPMD job in rank order, their N adding
	// up to N (nil: Argv, Env and Wdir for every rank, which are otherwise
	// the first app's).
	Apps []proto.App
	// Bind binds each node's ranks to CPUs: "none" (or ""), "core" or
	// "socket"; BindShare lets ranks share a core (--oversubscribe).
	Bind      string
	BindShare bool
	// MPI is which process-management interfaces the ranks are served
	// (--mpi): "" both PMI-1 and, for programs that use it, PMIx; "pmi1";
	// "pmix" (PMIx to every rank, PMI-1 too); "none".
	MPI string

	// Restart is what a failed rank costs the job (--restart): its end
	// (None), the rank's restart (Rank) or every rank's (Job); MaxRestarts
	// bounds the restarts, per rank under Rank, per job under Job.
	Restart     recovery.Policy
	MaxRestarts int
	// Spares are nodes, in order, whose agent starts on demand in place
	// of a node that went silent (--spare-nodes).
	Spares []string
	// Oversubscribe: with no spare left, a silent node's ranks may share
	// a surviving node's slots when none has enough free ones.
	Oversubscribe bool

	// Placement puts the ranks on hosts, whose agents Agents.Spawner
	// starts (nil: this machine). A spawner is required with a placement.
	Placement *alloc.Placement
	Heartbeat time.Duration // how often parents ping their children (0: 1 s)
	// Timing, for tests, shortens the failure detectors' bounds (the zero
	// value is production's); every agent is given it.
	Timing proto.Timing
	// Observe, for tests, is told what the root does (Event), from the
	// root's event loop: it must not block. nil: nobody is told.
	Observe func(Event)
	// Vanish, for tests, ends the front-end once closed as a SIGKILL of
	// its process would: its sockets close with nothing said, nothing more
	// is committed, Run returns ExitLauncher. nil: never.
	Vanish <-chan struct{}

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

	Stdin          *os.File // forwarded to rank 0 (nil: none)
	Stdout, Stderr io.Writer
	Signals        <-chan os.Signal // signals to forward to every rank

	// Detach, if set, is how the front-end leaves a replicated job on
	// SIGHUP once its root replica group is up: it ends this process, and
	// a replica agent takes over as root. Otherwise SIGHUP ends the job.
	Detach func(jobID string)

	// AtEnd, if set, runs on a goroutine of its own once every rank ended,
	// overlapping the job's end; Run returns after it did. It is not
	// called if no rank ended (the launch failed).
	AtEnd func()
}

// LocalHooks are how the root runs this machine's agent of a local launch
// in its own process, injected by the facade (the root does not import the
// agent).
type LocalHooks struct {
	// Run runs an agent on conn until the job ends or the link is lost
	// (Options.Agents.InProcess).
	Run launcher.RunFunc
	// Start, for tests, runs this machine's agent on the given end of its
	// link instead of starting an `ftlaunch agent` process.
	Start func(conn net.Conn) *launcher.LocalAgent
}

// Result is how a job ended.
type Result struct {
	ExitCode int
	// NodeTableAt is when every rank held the node table, measured from
	// Run's start (0 if the job never published one).
	NodeTableAt time.Duration
	// SteppedAside is set when the front-end left the job to a replica
	// agent that took the root over: ExitCode is then not the job's.
	SteppedAside *SteppedAside
}
