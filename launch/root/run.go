package root

// Run: the front-end's root, from its options to the job's end.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Run serves a job from its front-end: the root's event loop over the
// agents it starts.
func Run(ctx context.Context, opts Options, local LocalHooks) (Result, error) {
	if opts.N < 1 {
		return Result{ExitCode: ExitUsage}, fmt.Errorf("need at least one rank, got %d", opts.N)
	}
	if len(opts.Argv) == 0 {
		return Result{ExitCode: ExitUsage}, errors.New("no program given")
	}
	if err := proto.CheckApps(opts.Apps, opts.N); err != nil {
		return Result{ExitCode: ExitUsage}, err
	}
	opts.Heartbeat = cmp.Or(opts.Heartbeat, time.Second)
	if opts.KillAfter <= 0 {
		opts.KillAfter = 5 * time.Second
	}
	fe := newFrontend(roleFrontEnd, opts, output.NewWriter(opts.Stdout, opts.Stderr, opts.Label), journal.NewJobID(),
		testHooks{holdAt: os.Getenv(holdEnv), breakAt: os.Getenv(breakEnv)})
	fe.local = local
	fe.slots = opts.Placement.Slots()
	fe.out.Start()
	defer fe.out.Close() // last: it writes what the root's goroutines said as they ended
	// Deferred calls run last-in first-out: the root's goroutines are
	// joined after its context was cancelled and the journal closed.
	defer fe.wg.Wait()
	defer func() {
		if fe.releaseTimer != nil {
			fe.releaseTimer.Stop()
		}
	}()
	jcfg, tr, err := fe.journalConfig(ctx)
	if err != nil {
		return Result{ExitCode: ExitUsage}, err
	}
	fe.rootNode = jcfg.Node
	// The replica starts once the ranks' first exchange (node table, PMI
	// barrier) is done, or a moment after every rank runs, or when the
	// job fails: the launch does not share the CPU with it.
	j, err := journal.OpenGroup(ctx, jcfg, tr)
	if err != nil {
		return Result{ExitCode: ExitLauncher}, fmt.Errorf("job state log: %w", err)
	}
	fe.journal = j
	if err := j.InMemory(); err != nil {
		fe.warnf("job state log: %v; keeping the job's state in memory (ftlaunch inspect and status will not know this job)", err)
	}
	defer fe.journal.End() // after closeJournal
	defer fe.closeJournal()
	if opts.Replicas > 1 {
		// A root group can take over only once it exists: a launch that
		// lasts starts it early, while it goes on.
		t := time.AfterFunc(proto.GroupHold, fe.journal.Start)
		defer t.Stop()
	}
	if opts.Prestage {
		st, err := proto.ReadStaged(opts.Argv[0], opts.Wdir, proto.LookupEnv(opts.Env, "PATH"))
		if err != nil {
			return Result{ExitCode: ExitLauncher}, err
		}
		fe.stage = st
	}
	if opts.OutputDir != "" {
		if err := fe.out.OpenFiles(opts.OutputDir, opts.N); err != nil {
			return Result{ExitCode: ExitLauncher}, err
		}
	}
	fe.launching = output.ProgressOn(opts.Stderr, opts.Verbose)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan event, 256)
	fe.ctx, fe.events = ctx, events
	if err := fe.startAgents(ctx); err != nil {
		// The caller reports the error; the planner keeps it for the
		// final status.
		fe.exitCode = ExitLauncher
		_ = fe.decide(recovery.LaunchError{Msg: err.Error()})
		fe.killAgents()
		for _, a := range fe.agents {
			a.end().Wait()
		}
		return Result{ExitCode: ExitLauncher}, err
	}
	fe.journalPlan("")
	fe.goFunc(func() { fe.publishControl(proto.RootName, proto.ListenAddrs(fe.ln)) })
	if fe.ln != nil {
		defer fe.ln.Close()
	}
	if fe.cancelLaunch != nil {
		defer fe.cancelLaunch()
	}
	defer fe.stopGossip()
	if opts.Replicas > 1 {
		fe.watchStanding()
	}
	fe.exitCode = fe.loop(ctx, events)
	return Result{ExitCode: fe.exitCode, NodeTableAt: fe.nodeTableAt, SteppedAside: fe.journal.Aside()}, nil
}

// put hands ev to the root's event loop; false: the root's context ended
// first.
func (fe *frontend) put(ev event) bool {
	select {
	case fe.events <- ev:
		return true
	case <-fe.ctx.Done():
		return false
	}
}
