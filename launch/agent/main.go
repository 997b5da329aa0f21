package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
)

// The agent process: `ftlaunch agent` (its parent link on file descriptor 3,
// or over TCP from the bootstrap on stdin), and its signal state.

// Run runs an agent on an established parent connection until the job
// ends or the link is lost. What it has to say goes to log.
func Run(ctx context.Context, conn io.ReadWriteCloser, log io.Writer) error {
	return runAgent(ctx, conn, nil, log, nil, nil, nil)
}

// RunLocal runs the agent of a local launch in the caller's process (the
// root's, launch.Run): its phases go to trace, and guard is told of each
// rank's process group (both may be nil).
func RunLocal(ctx context.Context, conn io.ReadWriteCloser, log io.Writer, trace *proto.PhaseLog, guard launcher.RankGuard) error {
	return runAgent(ctx, conn, nil, log, trace, guard, nil)
}

// runAgent runs an agent on its parent link: tree is its place in a launch
// tree (nil: an agent on a socketpair), trace its phase log and guard
// the orphan guard told of each rank's process group (both may be nil), resume the
// way a replica agent resumes the root (nil: an agent that is no replica,
// or cannot be one).
func runAgent(ctx context.Context, conn io.ReadWriteCloser, tree *treeState, log io.Writer, trace *proto.PhaseLog, guard launcher.RankGuard, resume Resume) error {
	l := proto.NewLink(conn)
	a := &Agent{
		log:        log,
		trace:      trace,
		guard:      guard,
		resumeRoot: resume,
		tree:       tree,
		link:       l,
		up:         &uplink{l: l},
		outWin:     proto.NewWindow(proto.OutputWindow),
		outQ:       proto.NewOutQueue(),
		sup: supervision{
			ranks:  map[int]*rankProc{},
			gone:   map[int]bool{},
			exited: make(chan struct{}),
			rec: agentRecovery{changed: make(chan struct{}, 1),
				acked: map[int]bool{}, stopped: map[int]bool{}, held: map[int]bool{}},
		},
		coll: collectives{
			firstColl: make(chan struct{}),
			seq:       map[int]uint64{},
			colls:     map[uint64]*localColl{},
			sentUp:    map[uint64][]byte{},
			comb:      newCombiner(),
			ringWait:  map[uint64]*ringWait{},
			puts:      map[string][]byte{},
			kv:        map[string][]byte{},
			pmiPuts:   map[string][]byte{},
			pmiKV:     map[string][]byte{},
		},
		fo: failoverState{exits: map[int]proto.RankStatus{}},
	}
	return a.run(ctx)
}

// Main is the body of the internal `ftlaunch agent` command. Its
// parent link is inherited as file descriptor 3 (an agent on the
// front-end's machine), or with connect set a TCP connection with mutual
// TLS to the front-end, from credentials read on stdin (an agent started
// over SSH). It returns the process's exit code. resume builds a successor
// root when this agent, a replica of the root group, wins its election
// after the front-end's loss (the root package's, injected by launch).
func Main(ctx context.Context, args []string, stderr io.Writer, resume Resume) int {
	began := time.Now()
	cl, err := proto.ParseAgentArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	connect := cl.Connect
	trace := newPhaseLog(stderr)
	trace.At(began, "agent process running (its main began)")
	if err := cleanSignalState(); err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	if os.Getenv("GOMAXPROCS") == "" {
		// One thread runs the agent's goroutines, as Hydra's proxy is one
		// thread. Its work is small and I/O-bound, but it shares the node
		// with ranks that keep every core busy (MPI ranks busy-poll): with
		// several Ps, a PMI round trip hands goroutines between threads,
		// and each hand-off waits for the kernel to schedule a thread
		// behind the ranks. 16 MPICH ranks on one 2-core machine beside
		// CPU hogs: 0.97-1.03x mpiexec's time with one P, 0.99-1.02x with
		// two, and once 2.9x (docs/benchmarks.md).
		runtime.GOMAXPROCS(1)
	}
	if connect {
		// In a group start, Slurm names the node the task runs on.
		node := os.Getenv("SLURMD_NODENAME")
		if node == "" {
			node, _ = os.Hostname()
		}
		var early fence.Target
		if cl.Job != "" {
			early = fence.Target{Job: cl.Job, Node: cmp.Or(cl.Node, node), UpTo: cl.Inc}
		}
		return RunConnected(ctx, ConnectConfig{Stdin: pollableStdin(), Node: node, Stderr: stderr, Trace: trace, Began: began, Resume: resume, Fence: early})
	}
	f := os.NewFile(3, "parent-link")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: no parent link on fd 3: %v\n", err)
		return 2
	}
	return exitCode(runAgent(ctx, conn, nil, stderr, trace, nil, resume), stderr, trace)
}

// pollableStdin is the agent's stdin as a file read through Go's poller,
// whose blocked read a deadline interrupts (stdinWatch.stop): its
// session's pipe or socket (output.Pollable; its own end: the parent holds
// the other, so it stays non-blocking). A terminal or a file is os.Stdin
// as it is.
func pollableStdin() io.Reader {
	f, _ := output.Pollable(os.Stdin)
	return f
}

func exitCode(err error, stderr io.Writer, trace *proto.PhaseLog) int {
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 1
	}
	trace.Logf("agent exits")
	return 0
}

// ConnectConfig is how an agent started on a node (over SSH, srun, or as
// a test node's process) reaches its parent.
type ConnectConfig struct {
	// Stdin carries its bootstrap (credentials, where its parent listens)
	// and stays open for the session's life: its end is the agent's end
	// (but in a replicated job, which outlives it).
	Stdin  io.Reader
	Node   string    // this node's name: it picks a group bootstrap's entry
	Stderr io.Writer // what the agent has to say
	Trace  *proto.PhaseLog
	Began  time.Time // when the agent started (its hello reports the time since)
	Resume Resume    // builds a successor root (nil: this agent cannot)
	// Getenv reads the agent's environment (nil: os.Getenv): where the
	// parent's SSH session came from (SSH_CONNECTION).
	Getenv func(string) string
	// Fence, when its command line names it (proto.AgentArgs), is the fence
	// target the agent registers as before it reads its bootstrap (zero:
	// it registers from the bootstrap).
	Fence fence.Target
	// Spawner, for tests that run a launch tree's agents in their own
	// process, starts this agent's children, the agents a successor root
	// on it starts and its fences, instead of its launch mode's spawner
	// (nil: the launch mode's; ftlaunch agent never sets it).
	Spawner spawn.Spawner
	// Joined, for tests, is told of each collective every rank of this
	// node called, once their calls reached the agent: its number (its
	// epoch in the high 32 bits) and its operation (nil: nobody is told).
	// It must not block.
	Joined func(seq uint64, op rankproto.Op)
}

// RunConnected runs an agent started on a node: it reads its bootstrap,
// listens for its own children, connects back to its parent over TCP with
// the job's mutual TLS and runs until the job ends. It returns the
// process's exit code. `ftlaunch agent --connect` calls it with its own
// stdin; tests call it with a pipe.
func RunConnected(ctx context.Context, cfg ConnectConfig) int {
	stderr := cfg.Stderr
	var fenced fence.Target // the fence record this agent holds
	if cfg.Fence != (fence.Target{}) {
		// Registered before anything else: a parent whose host crashes
		// now never sends the bootstrap, and the fence of this node must
		// find the agent (or the agent the fence's mark).
		unregister, err := fence.Register(cfg.Fence)
		switch {
		case errors.Is(err, fence.ErrFenced):
			fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
			return 2
		case err != nil:
			// Not fatal: the agent registers again once it has its
			// bootstrap, and then once it has its job.
			fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		default:
			fenced = cfg.Fence
			defer unregister()
		}
	}
	b, err := readBootstrap(cfg.Stdin, proto.ConnectTimeout)
	if err == nil {
		err = b.Pick(cfg.Node)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	creds, err := secure.UnmarshalCredentials(b.Creds)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	// The listener for this agent's children and standby links.
	ln, err := secure.Listen(ctx, "tcp", ":0", creds)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	tree := newTreeState(b.Idx, creds, ln)
	tree.inc = b.Inc
	tree.spawner = cfg.Spawner
	tree.joined = cfg.Joined
	if t := (fence.Target{Job: b.Job, Node: b.Node, UpTo: max(b.Inc, 1)}); b.Job != "" && b.Node != "" && t != fenced {
		// Registered with the fence before it connects back: were its
		// parent's host to crash meanwhile, the root's fence of this node
		// finds it (it would otherwise live until its connect timeout,
		// past the job's end). run keeps this record once the agent knows
		// its job, unless its spec names another target.
		unregister, err := fence.Register(t)
		if errors.Is(err, fence.ErrFenced) {
			ln.Close()
			fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
			return 2
		}
		if err == nil {
			fenced = t
			defer unregister()
		}
	}
	tree.fenced = fenced
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	conn, err := connectBack(ctx, b, creds, proto.Hello{Idx: b.Idx, Port: tree.port, Init: time.Since(cfg.Began), Inc: b.Inc}, getenv)
	if err != nil {
		ln.Close()
		fmt.Fprintf(stderr, "ftlaunch agent: %v\n", err)
		return 2
	}
	// The session that started the agent stays open for the job's life;
	// its end (the parent closed it, or sshd dropped it) is the end of the
	// agent too. (An agent of a replicated job outlives it: see run.)
	w := watchStdin(cfg.Stdin)
	defer w.stop()
	tree.stdinGone = w.gone
	return exitCode(runAgent(ctx, conn, tree, stderr, cfg.Trace, nil, cfg.Resume), stderr, cfg.Trace)
}

// readBootstrap reads the bootstrap from r, waiting at most within: a
// parent that started this agent and died before it wrote the bootstrap
// (its host crashed: the SSH session stays open, silent) never sends it.
// On a timeout its read is interrupted (interruptRead) and joined; one
// that cannot be (a terminal's) is waited for stdinStopWait at most and
// left to the process's exit (RunConnected returns).
func readBootstrap(r io.Reader, within time.Duration) (*proto.Bootstrap, error) {
	type result struct {
		b   *proto.Bootstrap
		err error
	}
	ch := make(chan result, 1)
	done := make(chan struct{})
	go func() { // joined below
		defer close(done)
		b, err := proto.ReadBootstrap(r)
		ch <- result{b, err}
	}()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case res := <-ch:
		return res.b, res.err
	case <-t.C:
		interruptRead(r)
		awaitRead(done)
		return nil, fmt.Errorf("no bootstrap on stdin within %v: its parent is gone", within)
	}
}

// interruptRead ends a read of r blocked in another goroutine, where it
// can: a pipe or socket read through Go's poller (pollableStdin) by a
// deadline, a test's pipe by its close. A read of os.Stdin that is
// neither (a terminal's) cannot be interrupted.
func interruptRead(r io.Reader) {
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok && d.SetReadDeadline(time.Now()) == nil {
		return
	}
	if c, ok := r.(io.Closer); ok && r != io.Reader(os.Stdin) {
		_ = c.Close()
	}
}

// awaitRead waits for done, closed by a reader's goroutine as it ends,
// once its read was interrupted: stdinStopWait at most, for a read that
// could not be.
func awaitRead(done <-chan struct{}) {
	t := time.NewTimer(stdinStopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// cleanSignalState makes the agent's ranks start with every signal's
// default disposition and an empty signal mask, whatever the agent
// inherited (nohup ignores SIGHUP, a background job of a script SIGINT, a
// scheduler may block signals).
//
// An ignored signal stays ignored across exec, a caught one is reset to
// the default: the agent catches SIGINT and SIGHUP (which reach it from
// srun or a terminal it shares, and must not end it) and SIGPIPE (a write
// to its closed stdout or stderr is then an error, not its death) and
// drops them. Go catches the other signals itself. A signal mask survives
// exec too, and every thread of a Go program carries the one the process
// started with: an agent that started with signals blocked starts itself
// again, once, with none.
func cleanSignalState() error {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	unignoreSignals()
	// The mask of the thread that runs this goroutine, locked to it: a
	// thread running Go code has the process's initial mask (bar what the
	// runtime unblocked for itself); another thread may be in the middle
	// of a clone or fork, with every signal blocked for a moment.
	runtime.LockOSThread()
	var mask, none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("signal mask: %w", err)
	}
	if mask == none {
		runtime.UnlockOSThread()
		return nil
	}
	// Still locked: the mask set below is this thread's, which exec keeps.
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &none, nil); err != nil {
		return fmt.Errorf("unblock signals: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("unblock signals: %w", err)
	}
	return fmt.Errorf("unblock signals: start again: %w", syscall.Exec(self, os.Args, os.Environ()))
}

// unignoreSignals sets every signal the agent inherited as ignored and
// that the Go runtime leaves alone back to its default: an ignored signal
// stays ignored across exec, into the ranks. The runtime installs its own
// handlers for the signals it manages (a caught signal is reset by exec);
// a program built with cgo (the race detector) leaves signals 32 and 33 to
// the C library, and keeps them as they came.
func unignoreSignals() {
	const sigIgn, sigDfl = 1, 0
	for sig := 1; sig <= 64; sig++ {
		if sig == int(syscall.SIGKILL) || sig == int(syscall.SIGSTOP) {
			continue
		}
		var old launcher.KernelSigaction
		if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 || old.Handler != sigIgn {
			continue
		}
		dfl := launcher.KernelSigaction{Handler: sigDfl}
		_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
	}
}
