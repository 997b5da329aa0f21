package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The local launch's agent in the front-end's process: a goroutine that
// runs the same agent (runAgent) on the same socketpair link as an
// `ftlaunch agent` process would, so that the rank plumbing, PMI, output
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
//     blocked (inheritedSignalsClean); otherwise it is a process as
//     before.
//   - Its ranks and their own children die with it: an agent process that
//     saw its link drop (the front-end killed) sent SIGTERM to each rank's
//     process group, SIGKILL a second later. In process nobody would be
//     left to, so a guard does it: a /bin/sh process outside the
//     front-end, told of each rank's process group on a pipe, that signals
//     them if the pipe ends without "end" (the kernel closes it when the
//     front-end dies) (orphanGuard). The ranks themselves also get
//     Pdeathsig, which the kernel sends when the thread that forked them
//     exits (a Go thread exits only when a goroutine locked to it ends
//     without unlocking; the agent unlocks, startBound). Without /bin/sh
//     the agent is a process as before.
//   - Its own signals: the agent process ignored SIGINT and SIGHUP from a
//     terminal it shared; in process they reach the front-end, which
//     forwards them as before.

// startInProcess runs the agent on conn in a goroutine; kill ends it at
// once (its link closes; it kills its ranks), wait waits until it
// returned.
func (fe *frontend) startInProcess(conn net.Conn, guard *orphanGuard) *localAgent {
	ctx, cancel := context.WithCancel(context.Background())
	var trace *phaseLog
	if fe.opts.Verbose {
		trace = &phaseLog{w: fe.opts.Stderr, t0: fe.start}
	}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		defer conn.Close()
		trace.logf("agent running in the front-end's process")
		err = fe.local.Run(ctx, conn, fe.opts.Stderr, trace, guard.add)
		if err != nil {
			fmt.Fprintf(fe.opts.Stderr, "ftlaunch agent: %v\n", err)
		}
		// The agent killed its ranks' groups as it returned.
		guard.release()
		trace.logf("agent returned")
	}()
	return &localAgent{
		kill:      func() { cancel(); conn.Close() },
		wait:      func() error { <-done; cancel(); return err },
		inProcess: true,
	}
}

// guardScript is the orphan guard's program: it collects process groups,
// one per line, until "end" (exit) or the end of its input (the front-end
// died): then SIGTERM to every group, SIGKILL a second later.
const guardScript = `g=; while read -r p; do [ "$p" = end ] && exit 0; g="$g -$p"; done; ` +
	`[ -n "$g" ] || exit 0; kill -s TERM -- $g 2>/dev/null; sleep 1; kill -s KILL -- $g 2>/dev/null; exit 0`

// orphanGuard is the in-process agent's guard: a /bin/sh process in a
// session of its own (a terminal's signals do not reach it) that outlives
// the front-end. Its methods may be called from any goroutine.
type orphanGuard struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	w   *os.File // its input (nil once released)
}

// startGuard starts the guard.
func startGuard() (*orphanGuard, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("orphan guard: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin, cmd.Env = r, []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("orphan guard: %w", err)
	}
	return &orphanGuard{cmd: cmd, w: w}, nil
}

// add tells the guard of a rank's process group.
func (g *orphanGuard) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = fmt.Fprintf(g.w, "%d\n", pgid)
	}
}

// release ends the guard without signalling anything, and reaps it.
func (g *orphanGuard) release() {
	g.mu.Lock()
	w := g.w
	g.w = nil
	g.mu.Unlock()
	if w == nil {
		return
	}
	_, _ = w.WriteString("end\n")
	w.Close()
	_ = g.cmd.Wait()
}

// inheritedSignalsClean reports whether ranks forked by this process
// would start with no signal ignored (but those the Go runtime sets
// itself) and none blocked: the condition for running the local agent in
// process. It changes nothing.
func inheritedSignalsClean() bool {
	const sigIgn = 1
	for sig := 1; sig <= 64; sig++ {
		if sig == int(syscall.SIGKILL) || sig == int(syscall.SIGSTOP) {
			continue
		}
		var old kernelSigaction
		if _, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e == 0 && old.handler == sigIgn {
			return false
		}
	}
	// The mask of a thread running Go code is the process's initial one
	// (what a rank forked from it starts with), bar what the runtime
	// unblocked for itself.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var mask, none unix.Sigset_t
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &mask); err != nil {
		return false
	}
	return mask == none
}
