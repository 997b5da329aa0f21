package launch

import (
	"context"
	"fmt"
	"net"
	"runtime"
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
//   - Its ranks die with it: they are started with Pdeathsig, which the
//     kernel sends when the thread that forked them exits. A Go thread
//     exits only when a goroutine locked to it ends without unlocking;
//     the agent's goroutines unlock (startBound), and the front-end locks
//     none. The front-end's death still kills the ranks, but not their
//     own children: an agent process that saw its link drop killed each
//     rank's process group, and in process nobody is left to. That is why
//     it is not the default (Options.AgentInProcess).
//   - Its own signals: the agent process ignored SIGINT and SIGHUP from a
//     terminal it shared; in process they reach the front-end, which
//     forwards them as before.

// startInProcess runs the agent on conn in a goroutine; kill ends it at
// once (its link closes; it kills its ranks), wait waits until it
// returned.
func (fe *frontend) startInProcess(conn net.Conn) *localAgent {
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
		err = runAgentTraced(ctx, conn, nil, fe.opts.Stderr, trace)
		if err != nil {
			fmt.Fprintf(fe.opts.Stderr, "ftlaunch agent: %v\n", err)
		}
		trace.logf("agent returned")
	}()
	return &localAgent{
		kill:      func() { cancel(); conn.Close() },
		wait:      func() error { <-done; cancel(); return err },
		inProcess: true,
	}
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
