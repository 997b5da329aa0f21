package root

import (
	"context"
	"fmt"
	"net"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
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
func (fe *frontend) startInProcess(conn net.Conn, guard *launcher.OrphanGuard) *LocalAgent {
	ctx, cancel := context.WithCancel(context.Background())
	var trace *proto.PhaseLog
	if fe.opts.Verbose {
		trace = &proto.PhaseLog{W: fe.opts.Stderr, T0: fe.start}
	}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		defer conn.Close()
		trace.Logf("agent running in the front-end's process")
		err = fe.local.Run(ctx, conn, fe.opts.Stderr, trace, guard.Add)
		if err != nil {
			fmt.Fprintf(fe.opts.Stderr, "ftlaunch agent: %v\n", err)
		}
		// The agent killed its ranks' groups as it returned.
		guard.Release()
		trace.Logf("agent returned")
	}()
	return &LocalAgent{
		Kill:      func() { cancel(); conn.Close() },
		Wait:      func() error { <-done; cancel(); return err },
		inProcess: true,
	}
}
