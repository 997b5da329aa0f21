package launcher

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// The local launch's agent in the front-end's process: a goroutine that
// runs the same agent (LocalConfig.Run: the facade injects the agent
// package's entry) on the same socketpair link as an `ftlaunch agent`
// process would, so that the rank plumbing, PMI, output
// and the state log are served by the same code. What it saves is a second
// Go process's start (its exec, runtime and package initialization: 15-25
// ms of a `run -n 1 true` on the 2-core development machine, where a page
// fault is dear; docs/benchmarks.md).
//
// What a separate agent process gave that the goroutine must not lose:
//   - Its ranks start with every signal at its default and none blocked
//     (cleanSignalState). Ranks forked by a goroutine inherit the
//     front-end's ignored signals and its threads' initial signal mask,
//     so the agent runs in process only when nothing is ignored or
//     blocked (InheritedSignalsClean); otherwise it is a process as
//     before.
//   - Its ranks and their own children die with it: an agent process that
//     saw its link drop (the front-end killed) sent SIGTERM to each rank's
//     process group, SIGKILL a second later. In process nobody would be
//     left to, so a guard does it: a /bin/sh process outside the
//     front-end, told of each rank's process group on a pipe, that signals
//     them if the pipe ends without "end" (the kernel closes it when the
//     front-end dies) (OrphanGuard; it starts in the background, and the
//     agent forks no rank before it runs). The ranks themselves also get
//     Pdeathsig, which the kernel sends when the thread that forked them
//     exits (a Go thread exits only when a goroutine locked to it ends
//     without unlocking; the agent unlocks, startBound). Without /bin/sh
//     the agent is a process as before.
//   - Its own signals: the agent process ignored SIGINT and SIGHUP from a
//     terminal it shared; in process they reach the front-end, which
//     forwards them as before.

// LocalAgent is an agent on this machine, linked over a socketpair: an
// `ftlaunch agent` process, or a goroutine of the front-end.
type LocalAgent struct {
	Kill      func()       // ends it at once
	Wait      func() error // waits until it ended
	InProcess bool         // a goroutine of the front-end
}

// RunFunc runs an agent on conn until the job ends or the link is lost;
// its phases go to trace, its ranks' process groups to guard.
type RunFunc func(ctx context.Context, conn net.Conn, log io.Writer, trace *proto.PhaseLog, guard RankGuard) error

// LocalConfig says how to start this machine's agent.
type LocalConfig struct {
	Node      string    // its node's name, for messages
	JobID     string    // the job's ID, for its orphan guard (FTLAUNCH_JOBID)
	AgentPath string    // the ftlaunch executable of an agent process
	Stderr    io.Writer // the agent's messages
	Verbose   bool      // trace its phases, timed from Began
	Began     time.Time
	// InProcess asks for the agent in this process, run by Run, where it
	// can be (nothing ignored or blocked that ranks would inherit, and a
	// guard could start).
	InProcess bool
	Run       RunFunc
	// Start, for tests of the root and the agent in one process, runs the
	// agent on the given end of its link instead of all of the above.
	Start func(conn net.Conn) *LocalAgent
	// Verbosef says why an agent asked for in process is a process.
	Verbosef func(format string, args ...any)
}

// StartLocal starts this machine's agent on a socketpair link: an agent
// process with its link on file descriptor 3, or if asked and where it
// can, a goroutine of this process. An agent process runs in its own
// process group, so a terminal's signals reach only the front-end, which
// forwards them. It returns the agent and this side of its link.
func StartLocal(cfg LocalConfig) (*LocalAgent, net.Conn, error) {
	conn, theirs, err := SocketPair()
	if err != nil {
		return nil, nil, fmt.Errorf("agent link: %w", err)
	}
	defer theirs.Close()
	start := cfg.Start
	var guard *OrphanGuard
	if start == nil && cfg.Run != nil && cfg.InProcess && InheritedSignalsClean() {
		if guard, err = StartGuard(cfg.JobID); err == nil {
			start = func(c net.Conn) *LocalAgent { return startInProcess(cfg, c, guard) }
		} else if cfg.Verbose && cfg.Verbosef != nil {
			cfg.Verbosef("node %s: the agent runs as a process: %v", cfg.Node, err)
		}
	}
	if start != nil {
		c, err := net.FileConn(theirs)
		if err != nil {
			conn.Close()
			if guard != nil {
				guard.Release()
			}
			return nil, nil, fmt.Errorf("agent link: %w", err)
		}
		return start(c), conn, nil
	}
	cmd := exec.Command(cfg.AgentPath, "agent")
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.Stderr = cfg.Stderr
	cmd.Env = []string{}
	if cfg.Verbose {
		cmd.Env = append(cmd.Env, proto.TraceEnv+"="+strconv.FormatInt(cfg.Began.UnixNano(), 10))
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return &LocalAgent{Kill: func() { _ = cmd.Process.Kill() }, Wait: cmd.Wait}, conn, nil
}

// startInProcess runs the agent on conn in a goroutine; Kill ends it at
// once (its link closes; it kills its ranks), Wait waits until it
// returned.
func startInProcess(cfg LocalConfig, conn net.Conn, guard *OrphanGuard) *LocalAgent {
	ctx, cancel := context.WithCancel(context.Background())
	var trace *proto.PhaseLog
	if cfg.Verbose {
		trace = &proto.PhaseLog{W: cfg.Stderr, T0: cfg.Began}
	}
	done := make(chan struct{})
	var err error
	go func() { // joined by Wait
		defer close(done)
		defer conn.Close()
		trace.Logf("agent running in the front-end's process")
		err = cfg.Run(ctx, conn, cfg.Stderr, trace, guard)
		if err != nil {
			fmt.Fprintf(cfg.Stderr, "ftlaunch agent: %v\n", err)
		}
		// The agent killed its ranks' groups as it returned.
		guard.Release()
		trace.Logf("agent returned")
	}()
	return &LocalAgent{
		Kill:      func() { cancel(); conn.Close() },
		Wait:      func() error { <-done; cancel(); return err },
		InProcess: true,
	}
}
