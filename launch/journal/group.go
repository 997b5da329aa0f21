package journal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/hashicorp/raft"
)

// Group is a root's side of the job's state log and of its replica group
// (docs/state.md): the journal, the hold on its replica's start, the
// commit of the final status, the replica agents that joined the group
// (or failed to), and the front-end's raft transport. The root's event
// loop owns it; Start may be called from any goroutine, AddReplica from
// the root's goroutines.
type Group struct {
	*Journal
	tr       *raft.NetworkTransport // the front-end voter's (nil: none)
	hold     chan struct{}
	holdOnce sync.Once
	closing  bool   // the final status's commit was begun, or the log given up
	wait     func() // waits for that commit (nil before)
	settled  map[string]bool
	joined   []string
	watch    *Watch        // a replicated front-end's watch on its lead (nil: none)
	aside    *SteppedAside // set once the front-end stepped aside (StepAside)
}

// OpenGroup opens the root's state log (Open) with its replica's start
// held until Start (cfg.Hold); tr, if set, is the front-end voter's
// transport (Config.FirstOfGroup), closed by End, or at once if Open
// fails.
func OpenGroup(ctx context.Context, cfg Config, tr *raft.NetworkTransport) (*Group, error) {
	g := &Group{tr: tr, hold: make(chan struct{}), settled: map[string]bool{}}
	cfg.Hold = g.hold
	j, err := Open(ctx, cfg)
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, err
	}
	g.Journal = j
	return g, nil
}

// GroupOf is the group of journal j, whose replica's start is not held
// (tests).
func GroupOf(j *Journal) *Group {
	g := &Group{Journal: j, hold: make(chan struct{}), settled: map[string]bool{}}
	g.Start()
	return g
}

// Start lets the journal's replica start (it was held so that it does not
// share the CPU with the launch); later calls, and a nil Group's, do
// nothing.
func (g *Group) Start() {
	if g != nil {
		g.holdOnce.Do(func() { close(g.hold) })
	}
}

// Closing reports whether the final status's commit was begun
// (BeginClose), or the log given up (GiveUp): nothing more is written.
func (g *Group) Closing() bool { return g.closing }

// BeginClose begins committing the final status (code, msg) in the
// background and returns at once; the function it returns waits for the
// commit, then calls after with how long it took and its error, once. A
// second BeginClose returns the first's wait (or, after GiveUp, one that
// does nothing).
func (g *Group) BeginClose(code int, msg string, after func(took time.Duration, err error)) (wait func()) {
	if g.closing {
		if g.wait == nil {
			return func() {}
		}
		return g.wait
	}
	g.closing = true
	closed := g.CloseInBackground(5*time.Second, code, msg)
	g.wait = sync.OnceFunc(func() { after(closed()) })
	return g.wait
}

// Ending is how a root says the end of its state log (EndWith).
type Ending struct {
	JobID           string
	Warnf, Verbosef func(format string, args ...any)
	Verbose         bool        // the commit's figures are said (Verbosef)
	Where           func() bool // asked once committed: say where the log is
}

// EndWith is BeginClose whose end says what came of the commit (e):
// its error, with --verbose its figures, and where the log is if Where
// says so; and removes the live report.
func (g *Group) EndWith(code int, msg string, e Ending) (wait func()) {
	return g.BeginClose(code, msg, func(took time.Duration, err error) {
		if err != nil {
			e.Warnf("job state log: %v", err)
		}
		if e.Verbose {
			st := g.Stats()
			e.Verbosef("state log closed in %s: its replica had its files open %s and led %s after the job began; %d entries in %d flushes",
				ms(took), ms(st.Opened), ms(st.Leading), st.Entries, st.Flushes)
		}
		if err := g.RemoveLive(); err != nil {
			e.Warnf("%v", err)
		}
		if e.Where() && g.Dir() != "" {
			e.Warnf("job %s: state in %s (ftlaunch inspect)", e.JobID, g.Dir())
		}
	})
}

// GiveUp leaves the log to another root without a final status (a
// front-end that stepped aside): the front-end's voter's transport closes.
func (g *Group) GiveUp() {
	g.closing = true
	g.closeTransport()
}

// Vanish ends the front-end's replica as a SIGKILL of its process would:
// the replica stops (raft's shutdown says nothing to the peers), then its
// transport; then does stops the rest of the front-end, and the journal
// ends with nothing more committed.
func (g *Group) Vanish(then func()) {
	if r := g.Replica(); r != nil {
		_ = r.Shutdown()
	}
	g.closeTransport()
	then()
	g.closing = true // no final status
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_ = g.Close(gone, 1, "the front-end vanished")
}

// End shuts down the replica that the final status's commit kept up for
// its followers (Config.KeepForFollowers), then the front-end voter's
// transport; called once every agent's link ended, and by the root's end.
func (g *Group) End() {
	g.Release()
	g.closeTransport()
}

func (g *Group) closeTransport() {
	if g.tr != nil {
		g.tr.Close()
	}
}

// Watch has the group watch its front-end's lead (NewWatch): a replicated
// front-end's, whose root then asks Hold, Replay, Deposed and StepAside.
func (g *Group) Watch(cfg WatchConfig) { g.watch = NewWatch(g.Journal, cfg) }

// Hold reports whether the root must not act on its event ev now
// (Watch.Keep): never without a watch, once the job's end is being
// committed (it is decided, and the log's replica shuts down), or for an
// event the root handles whoever leads (harmless).
func (g *Group) Hold(ctx context.Context, ev any, harmless bool) bool {
	if g == nil || g.watch == nil || g.closing || harmless {
		return false
	}
	defer g.tellLeads(g.watch.Deposed())
	return g.watch.Keep(ctx, ev)
}

// Replay is the root's look at its standing (Watch.Replay): the events
// held, to handle now; none without a watch, once the job's end is being
// committed, or after it stepped aside.
func (g *Group) Replay(ctx context.Context) []any {
	if g == nil || g.watch == nil || g.closing || g.aside != nil {
		return nil
	}
	defer g.tellLeads(g.watch.Deposed())
	return g.watch.Replay(ctx)
}

// tellLeads tells the watch's Leads when the front-end's look deposed it
// or found it leading again (was: deposed before), until it stepped aside.
func (g *Group) tellLeads(was bool) {
	if now := g.watch.Deposed(); now != was && g.aside == nil && g.watch.cfg.Leads != nil {
		g.watch.cfg.Leads(!now)
	}
}

// Deposed reports whether the front-end is deposed (or stepped aside).
func (g *Group) Deposed() bool { return g != nil && g.watch != nil && g.watch.Deposed() }

// Aside is how the front-end stepped aside (StepAside; nil: it did not,
// or it has no watch).
func (g *Group) Aside() *SteppedAside {
	if g == nil {
		return nil
	}
	return g.aside
}

// StepAside returns, once, how the front-end stepped aside when its watch
// did (nil otherwise): its state log is given up (GiveUp), and the root
// carries out its part.
func (g *Group) StepAside() *SteppedAside {
	if g == nil || g.watch == nil || g.aside != nil || g.watch.Aside() == nil {
		return nil
	}
	g.aside = g.watch.Aside()
	g.GiveUp() // no final status: the successor's
	return g.aside
}

// WriteLive replaces the job's live report with live()'s (WriteLive;
// node, the writer's) while the state log is open and on files. Errors
// are not the job's: a report that cannot be written is only missing.
func (g *Group) WriteLive(node string, live func() Live) {
	if g != nil && !g.closing && g.Dir() != "" {
		_ = WriteLive(g.Dir(), node, live())
	}
}

// RemoveLive removes the live report (RemoveLive) once the final status
// is committed (none on files: nothing to remove).
func (g *Group) RemoveLive() error {
	if g == nil || g.Dir() == "" {
		return nil
	}
	return RemoveLive(g.Dir())
}

// Expect notes that a replica agent was given a replica of its own to
// host (again): it is not settled until it joined or failed to.
func (g *Group) Expect(name string) { delete(g.settled, name) }

// Settle notes that the replica agent name joined the group (joined) or
// will not (its replica did not start, its join failed).
func (g *Group) Settle(name string, joined bool) {
	g.settled[name] = true
	if joined && !slices.Contains(g.joined, name) { // once: a replica host's next agent joins again
		g.joined = append(g.joined, name)
	}
}

// Settled reports whether replica agent name joined the group or will
// not.
func (g *Group) Settled(name string) bool { return g.settled[name] }

// EndReady reports whether the job's end can be committed: every replica
// agent of up (those still up) joined the group or failed to, so that the
// final status is on all of them, or the group has not formed at all (the
// front-end's replica does not lead yet, or has none: nobody joined, and
// the journal writes the end alone instead of waiting for an election:
// docs/state.md). While one is joining it lets the replica start (they
// join once the front-end's replica leads); it gives up waiting once the
// job ended (at ended) 10 s ago, and says so (late).
func (g *Group) EndReady(up []string, ended time.Time) (ready, late bool) {
	if g.Replica() == nil || !slices.ContainsFunc(up, func(name string) bool { return !g.settled[name] }) {
		return true, false
	}
	if time.Since(ended) > 10*time.Second {
		return true, true
	}
	g.Start()
	return false, false
}

// Joined lists the replica agents that joined the group, in order.
func (g *Group) Joined() []string { return g.joined }

// AddReplica adds the replica agent name, listening at addr, to the group
// (Join, bounded by 30 s), in place of the voter replaces ("": none),
// saying what came of it with verbosef or, for a failure that is not the
// job's end, warnf; it reports whether it joined. It blocks: the root
// runs it on a goroutine of its own.
func (g *Group) AddReplica(ctx context.Context, name, addr, replaces string, warnf, verbosef func(string, ...any)) bool {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := g.Join(ctx, name, addr, replaces)
	switch {
	case err == nil:
		if replaces != "" {
			verbosef("root replica of the lost node %s left the group", replaces)
		}
		verbosef("root replica on %s joined the group (%s)", name, addr)
	case errors.Is(err, ErrClosed):
		verbosef("root replica on %s not added: the job ended before it could join (%v)", name, err)
	default:
		warnf("root replica on %s not added: %v", name, err)
	}
	return err == nil
}

// LostVoter is the voter of the group that is none of names (the agents'
// nodes): the lost front-end's, in a successor's group ("": none, or the
// group is not known), and how many servers the group has.
func (g *Group) LostVoter(names []string) (voter string, servers int) {
	voters, servers, ok := g.Members()
	if !ok {
		return "", 0
	}
	for _, v := range voters {
		if !slices.Contains(names, v) {
			voter = v
		}
	}
	return voter, servers
}

// FrontEndConfig configures the front-end's state log of job (its
// Replicas: 1, 3 or 5) under stateDir: one voter, kept in memory if its
// files cannot be written and written without a raft server; or the first
// voter of a group whose others are agents, at least Replicas-1 of them
// among agents (the job's nodes; remote: they are not this machine's one
// agent), reached
// over TCP with the job's mutual TLS (creds, made when needed) at host,
// and kept up for its followers for keep after the final status
// (KeepForFollowers). It returns the transport of a group's voter (nil:
// none), which End closes.
func FrontEndConfig(ctx context.Context, stateDir, node string, job Job, agents []string, remote bool, creds func() (*secure.Credentials, error), host string, keep time.Duration) (Config, *raft.NetworkTransport, error) {
	r := max(job.Replicas, 1)
	job.Replicas = r
	// One replica, in the front-end, can keep the state in memory (replica
	// agents need its files), and needs no election (docs/state.md).
	cfg := Config{StateDir: stateDir, Node: node, Job: job, Fallback: r == 1, Solo: r == 1}
	switch {
	case r == 1:
		return cfg, nil, nil
	case r != 3 && r != 5:
		return cfg, nil, fmt.Errorf("--replicas must be 1, 3 or 5, got %d", r)
	case !remote || len(agents) < r-1:
		return cfg, nil, fmt.Errorf("--replicas %d needs %d nodes besides the front-end (hosts or --test-nodes), the job has %d", r, r-1, len(agents))
	}
	c, err := creds()
	if err != nil {
		return cfg, nil, err
	}
	tr, err := cfg.FirstOfGroup(ctx, r, c, host, agents, RaftCutFromEnv())
	if err != nil {
		return cfg, nil, err
	}
	cfg.KeepForFollowers = keep
	return cfg, tr, nil
}
