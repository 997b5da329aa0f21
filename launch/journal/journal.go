package journal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Defaults of Config.
const (
	DefaultLinger       = 50 * time.Millisecond
	DefaultMaxRows      = 4096
	DefaultElectTimeout = 10 * time.Second
)

// Config configures a Journal.
type Config struct {
	// StateDir holds one directory per job; "" means DefaultStateDir().
	StateDir string
	// Node is this replica's node name: its directory under the job's and
	// its raft server ID. "" means the host name.
	Node string
	// Job is the job; ID (a plain file name) and N >= 1 are required.
	// A zero Start means now.
	Job Job

	// Transport carries raft's RPCs; nil means an in-memory transport of
	// the journal's own, enough for a single voter. A given transport
	// belongs to the caller, who closes it after Close.
	Transport raft.Transport
	// Peers are the group's initial voters, this replica included; nil
	// means this replica alone. With peers the journal writes only while
	// its replica leads (records wait in the queue until it does).
	Peers []raft.Server
	// Timing is raft's timing; zero means raftstore.DefaultTiming for
	// the number of peers (10 ms timers for a single voter: it elects
	// itself in one round, about 20 ms after Open; raft's 5 ms floor
	// is no faster on average and sometimes takes a second round, as
	// BenchmarkOpen shows).
	Timing raftstore.Timing

	// Linger is how long a record may wait for others to share its raft
	// entry (default DefaultLinger). Milestones (plan, node table,
	// failure, Sync, Close) are flushed at once.
	Linger time.Duration
	// MaxRows bounds the rows of one UpdateRanks entry (default
	// DefaultMaxRows); that many waiting rows also trigger a flush.
	MaxRows int
	// ElectTimeout bounds the wait for this replica to lead before its
	// first write (default DefaultElectTimeout).
	ElectTimeout time.Duration
	// Regain bounds the wait for the replica to lead again after a write
	// found it deposed (default ElectTimeout), for a journal whose caller
	// does not watch its standing. A watched one (NewWatch: the
	// front-end's) waits as long as it lasts: its caller holds what it
	// would act on meanwhile, and abandons the journal once it steps
	// aside (docs/state.md, "A front-end that lost the lead").
	Regain time.Duration
	// LoseLeadAt, for tests, names a recovery phase (RecoveryPhase.Stage)
	// before whose first commit the replica hands its lead to another
	// voter and waits until it no longer leads: the leadership blip a
	// loaded machine gave a recovery's first commit (docs/chaos.md).
	LoseLeadAt string
	// NoLeader is how long the replica, once it led, may go without
	// knowing any leader before the journal takes the group's majority
	// for lost (default DefaultNoLeader): a write waiting for the lead to
	// come back then fails with ErrNoMajority, and so do later ones at
	// once, Close's included.
	NoLeader time.Duration
	// JoinWait bounds how long the final status waits for a join under
	// way when Close is called (default DefaultJoinWait; see Join).
	JoinWait time.Duration
	// Logger receives raft's log; nil discards it.
	Logger hclog.Logger
	// KeepForFollowers, if positive, keeps the replica up after Close
	// committed the final status, until Release is called or this long
	// has passed: a follower a few entries behind (on a loaded machine,
	// after a leadership change) gets the end of the log from it, where
	// a leader shut down at once left it to the followers' own election
	// — and a follower whose agent exits first takes its entries with it
	// (chaos's replica-digests, issue #27). Close then returns once the
	// status is committed; Release shuts the replica down.
	KeepForFollowers time.Duration
	// Hold, if not nil, delays the replica's start (its files, its
	// election) until Hold is closed or Close is called, so that it does
	// not compete for the CPU with the launch it records (a solo log opens
	// its file at once and holds its writes). Records queue meanwhile.
	Hold <-chan struct{}
	// Replica, if set, is a replica that already leads the job's group (a
	// successor root's): the journal writes through it, does not record
	// the job again, and leaves it running at Close.
	Replica *raftstore.Replica
	// Solo writes the log of a single voter without a raft server
	// (raftstore.Solo): no election to wait for, and each flush is one
	// transaction and one sync, the final status riding with the records
	// still queued at Close. The files are a replica's as raft writes them.
	// Transport, Peers and Timing are not used, Replica returns nil (FSM
	// gives the state).
	Solo bool
	// Fallback keeps the state in memory when the state directory cannot
	// be written (nor found), instead of failing Open or losing the
	// records: the replica runs as usual, and nothing is left afterwards
	// (InMemory says why). Only for a single voter: a group needs files.
	Fallback bool
}

// Stats counts what the journal wrote.
type Stats struct {
	Entries int // raft entries this journal committed (refused ones included)
	Refused int // entries the state machine refused (see Err)
	Flushes int
	Rows    int // node-table rows written (a row written twice counts twice)
	Events  int
	// Opened is how long the replica took from Open to have its files
	// open (a Hold included; 0 until it has).
	Opened time.Duration
	// Leading is how long the replica took from Open to lead (0 until it
	// does); a solo log leads once open.
	Leading time.Duration
	// Alone: Close came before the replica led a group of its own, and
	// its log was written without raft (as a solo log's).
	Alone bool
}

// Journal is the front-end's handle on the job's state log.
//
// Threading: every method may be called from any goroutine. The record
// methods only append to a queue under a mutex and never block on raft or
// the disk. Records are written in the order they were made.
type Journal struct {
	cfg     Config
	jobDir  string
	opened  time.Time
	cancel  context.CancelFunc
	wake    chan struct{} // capacity 1: "the queue has something"
	ready   chan struct{} // closed once the replica leads, or failed to
	done    chan struct{} // closed when the journal goroutine has ended
	ownsTr  bool          // the transport is the journal's own
	release chan struct{} // closed by Close: ends a Hold
	relOnce sync.Once
	// majorityAlive: the caller's word that a majority of the voters
	// live (MajorityAlive), under mu.
	majorityAlive bool
	// watched: the caller watches the replica's standing (NewWatch), under
	// mu: a write waits for the lead to come back without Regain's bound.
	watched bool
	// final is closed once the writer has ended (the final status
	// committed, or not); kept is closed by Release (KeepForFollowers).
	final    chan struct{}
	kept     chan struct{}
	keptOnce sync.Once
	replica  *raftstore.Replica
	solo     *raftstore.Solo
	memory   error // why the state is kept in memory (nil: in files); set before run starts

	joinMu sync.Mutex // held by the join under way (Join)

	mu      sync.Mutex
	queue   []record
	joins   int  // joins under way (Join)
	closing bool // Close was called: later records are dropped, joins refused
	dead    bool // the goroutine ended: records are dropped
	err     error
	stats   Stats
}

// record is one call of a record method, queued.
type record struct {
	at       time.Time
	plan     *Plan
	agent    *AgentUp
	started  *started
	table    *table
	exit     *RankExit
	failure  *Failure
	phase    *RecoveryPhase
	sync     chan error
	finish   *raftstore.Status
	model    *ModelMeasured
	colls    *CollTotals
	stranded *Stranded
	fence    *Fence
}

type started struct {
	node  string
	ranks []int
	pids  []int
	incs  []uint64 // restarted ranks' incarnations (nil: a first start)
}

type table struct {
	nodes   []string
	ituples [][]byte
}

// Open starts the job's replica and returns at once; the replica opens
// its files and elects itself in the journal's goroutine (see Ready).
// Synchronously, Open only checks the configuration, creates the job's
// directory and points STATE-DIR/latest at it. ctx bounds the replica's
// start: if it ends before the replica leads, the journal gives up (Err
// says why) and records are dropped. Close must be called in every case.
func Open(ctx context.Context, cfg Config) (*Journal, error) {
	if err := checkJobID(cfg.Job.ID); err != nil {
		return nil, fmt.Errorf("journal: open: %w", err)
	}
	if cfg.Job.N < 1 || cfg.Job.N > raftstore.MaxRanks {
		return nil, fmt.Errorf("journal: open: job %s of %d ranks: need 1..%d", cfg.Job.ID, cfg.Job.N, raftstore.MaxRanks)
	}
	var memory error
	if cfg.StateDir == "" {
		d, err := DefaultStateDir()
		switch {
		case err == nil:
			cfg.StateDir = d
		case cfg.Fallback && len(cfg.Peers) == 0:
			memory = err
		default:
			return nil, fmt.Errorf("journal: open: %w", err)
		}
	}
	if cfg.Node == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		cfg.Node = h
	}
	if cfg.Job.Start.IsZero() {
		cfg.Job.Start = time.Now()
	}
	if cfg.Job.Replicas == 0 {
		cfg.Job.Replicas = max(1, len(cfg.Peers))
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = DefaultMaxRows
	}
	if cfg.ElectTimeout <= 0 {
		cfg.ElectTimeout = DefaultElectTimeout
	}
	if cfg.Regain <= 0 {
		cfg.Regain = cfg.ElectTimeout
	}
	if cfg.NoLeader <= 0 {
		cfg.NoLeader = DefaultNoLeader
	}
	if cfg.JoinWait <= 0 {
		cfg.JoinWait = DefaultJoinWait
	}
	j := &Journal{
		cfg:     cfg,
		jobDir:  JobDir(cfg.StateDir, cfg.Job.ID),
		opened:  time.Now(),
		wake:    make(chan struct{}, 1),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
		release: make(chan struct{}),
		final:   make(chan struct{}),
		kept:    make(chan struct{}),
	}
	if memory == nil {
		memory = makeJobDir(cfg.StateDir, cfg.Job.ID)
		if memory != nil && (!cfg.Fallback || len(cfg.Peers) > 0) {
			return nil, fmt.Errorf("journal: open: %w", memory)
		}
	}
	if memory != nil {
		j.memory, j.jobDir = memory, ""
	}
	if cfg.Solo && (cfg.Transport != nil || len(cfg.Peers) > 0 || cfg.Replica != nil) {
		return nil, errors.New("journal: open: a solo log has no transport, peers or replica")
	}
	if cfg.Transport == nil && !cfg.Solo {
		_, tr := raft.NewInmemTransport(raft.ServerAddress("inmem:" + cfg.Node))
		j.cfg.Transport, j.ownsTr = tr, true
	}
	if len(j.cfg.Peers) == 0 && !cfg.Solo {
		j.cfg.Peers = []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.Node), Address: j.cfg.Transport.LocalAddr()}}
	}
	var runCtx context.Context
	runCtx, j.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go j.run(ctx, runCtx)
	return j, nil
}

// makeJobDir creates the job's directory and points STATE-DIR/latest at
// it.
func makeJobDir(stateDir, jobID string) error {
	if err := os.MkdirAll(JobDir(stateDir, jobID), 0o700); err != nil {
		return err
	}
	return setLatest(stateDir, jobID)
}

// Dir returns the job's state directory, STATE-DIR/<job id>: what
// `ftlaunch inspect` takes ("" when the state is kept in memory).
func (j *Journal) Dir() string { return j.jobDir }

// ReplicaDir returns this replica's directory, Dir()/<node> ("" in
// memory).
func (j *Journal) ReplicaDir() string {
	if j.jobDir == "" {
		return ""
	}
	return filepath.Join(j.jobDir, j.cfg.Node)
}

// InMemory returns why the journal keeps the state in memory (see
// Config.Fallback), or nil when it writes files.
func (j *Journal) InMemory() error { return j.memory }

// Ready waits until the replica leads and has recorded the job, or failed
// to (then it returns the error). The front-end need not call it.
func (j *Journal) Ready(ctx context.Context) error {
	select {
	case <-j.ready:
		return j.Err()
	case <-ctx.Done():
		return fmt.Errorf("journal: waiting for the replica to lead: %w", ctx.Err())
	}
}

// Err returns the first error the journal met, or nil.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Stats returns what the journal wrote so far.
func (j *Journal) Stats() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.stats
}

// isWatched reports whether the caller watches the replica's standing
// (NewWatch).
func (j *Journal) isWatched() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.watched
}

func (j *Journal) setErr(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = err
	}
}

// push queues a record and wakes the journal goroutine. It reports false
// if the record was dropped (the journal is closing or dead).
func (j *Journal) push(r record) bool {
	if r.at.IsZero() {
		r.at = time.Now()
	}
	j.mu.Lock()
	if j.closing || j.dead {
		j.mu.Unlock()
		return false
	}
	j.queue = append(j.queue, r)
	j.mu.Unlock()
	j.poke()
	return true
}

// Plan records the launch plan. Call it once the plan is known, before
// the agents' records.
func (j *Journal) Plan(p Plan) { j.push(record{plan: &p}) }

// AgentUp records an agent that connected back. Call it when the
// front-end activates the agent (any goroutine).
func (j *Journal) AgentUp(a AgentUp) {
	r := record{agent: &a}
	if !a.Connected.IsZero() {
		r.at = a.Connected
	}
	j.push(r)
}

// RanksStarted records that a node's ranks run, with their pids
// (pids[i] is ranks[i]'s). Call it on the agent's "started" report. The
// journal keeps the slices: do not modify them afterwards.
func (j *Journal) RanksStarted(node string, ranks, pids []int) {
	j.push(record{started: &started{node: node, ranks: ranks, pids: pids}})
}

// NodeTable records the node table once it went to every rank: nodes[r]
// is rank r's node ("" or a nil slice: as recorded by RanksStarted) and
// ituples[r] its I-tuple (where it listens). Both have one entry per rank.
// The journal keeps the slices: do not modify them afterwards.
func (j *Journal) NodeTable(nodes []string, ituples [][]byte) {
	j.push(record{table: &table{nodes: nodes, ituples: ituples}})
}

// RankExited records a rank's end. Call it on the agent's exit report
// (and for the ranks of a lost agent).
func (j *Journal) RankExited(e RankExit) { j.push(record{exit: &e}) }

// Fenced records the fence of a node whose agent was declared lost: what
// it killed there, or why it failed.
func (j *Journal) Fenced(f Fence) { j.push(record{fence: &f}) }

// Failure records a failure the front-end declared (the job's first
// failure, a lost agent, a timeout). The record is flushed at once.
func (j *Journal) Failure(f Failure) { j.push(record{failure: &f}) }

// Sync flushes everything recorded so far and waits until it is
// committed. It returns the journal's first error, if any. The front-end
// need not call it (Close syncs); tests and benchmarks do.
func (j *Journal) Sync(ctx context.Context) error {
	ch := make(chan error, 1)
	if !j.push(record{sync: ch}) {
		if err := j.Err(); err != nil {
			return err
		}
		return errors.New("journal: sync after close")
	}
	select {
	case err := <-ch:
		return err
	case <-j.done:
		return j.Err()
	case <-ctx.Done():
		return fmt.Errorf("journal: sync: %w", ctx.Err())
	}
}

// CloseInBackground begins Close, bounded by timeout, on a goroutine of
// its own and returns at once: the caller goes on (its agents exit) while
// the final status is committed and synced. wait joins that goroutine and
// returns how long Close took and its error; it may be called again.
func (j *Journal) CloseInBackground(timeout time.Duration, exitCode int, msg string) (wait func() (time.Duration, error)) {
	began := time.Now()
	done := make(chan struct{})
	var err error
	var took time.Duration
	go func() { // joined by wait
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		err = j.Close(ctx, exitCode, msg)
		took = time.Since(began)
	}()
	return func() (time.Duration, error) {
		<-done
		return took, err
	}
}

// Close flushes what is queued, commits the job's final status (exit code
// and message), and shuts the replica down (with KeepForFollowers: keeps
// it up until Release); it returns the journal's first error. If ctx ends
// first, the writes still pending are abandoned and the replica is shut
// down anyway. Later calls wait for the first and return the same error.
// Records made after Close are dropped.
func (j *Journal) Close(ctx context.Context, exitCode int, msg string) error {
	j.mu.Lock()
	first := !j.closing
	if first && !j.dead {
		j.queue = append(j.queue, record{at: time.Now(), finish: &raftstore.Status{Done: true, ExitCode: exitCode, Message: msg}})
	}
	j.closing = true
	j.mu.Unlock()
	j.relOnce.Do(func() { close(j.release) })
	j.poke()
	keep := j.cfg.KeepForFollowers > 0
	ended := j.done
	if keep {
		ended = j.final
	}
	select {
	case <-ended:
	case <-ctx.Done():
		j.cancel()
		<-j.done
		if first {
			j.setErr(fmt.Errorf("journal: close: %w", ctx.Err()))
		}
	}
	if !keep {
		j.cancel()
	}
	return j.Err()
}

// Release shuts down a replica that Close kept up for its followers
// (Config.KeepForFollowers) and waits for it; the front-end calls it once
// every agent said it is done. It is idempotent, and without
// KeepForFollowers (or before Close) it only ends the journal as a
// cancelled Close would.
func (j *Journal) Release() {
	j.keptOnce.Do(func() { close(j.kept) })
	j.cancel()
	<-j.done
}

// take empties the queue.
func (j *Journal) take() []record {
	j.mu.Lock()
	defer j.mu.Unlock()
	q := j.queue
	j.queue = nil
	return q
}

// run is the journal goroutine: it opens the replica, waits until it
// leads, records the job, then folds queued records into entries until
// Close. startCtx is the caller's (it bounds the start); ctx is cancelled
// by Close.
func (j *Journal) run(startCtx, ctx context.Context) {
	defer close(j.done)
	finalClosed := false
	endFinal := func() {
		if !finalClosed {
			finalClosed = true
			close(j.final)
		}
	}
	defer endFinal()
	defer func() {
		j.mu.Lock()
		j.dead = true
		pending := j.queue
		j.queue = nil
		j.mu.Unlock()
		for _, r := range pending {
			if r.sync != nil {
				r.sync <- j.Err()
			}
		}
	}()
	readied := false
	defer func() {
		if !readied {
			close(j.ready)
		}
	}()
	if j.ownsTr {
		defer j.cfg.Transport.(*raft.InmemTransport).Close()
	}
	if r := j.cfg.Replica; r != nil {
		j.replica = r
		w := newWriter(j, r)
		// A root that took over writes rows the lost root wrote before:
		// it starts from them, so that an exit keeps the rank's node and
		// pid.
		w.seed(r.FSM().Copy())
		close(j.ready)
		readied = true
		w.loop(ctx)
		return
	}
	if j.cfg.Solo {
		j.runSolo(ctx)
		readied = true
		return
	}
	if !j.hold(ctx) {
		return
	}
	if j.alone() && j.isClosing() {
		// Closed before the replica started: no group to wait for.
		j.runSolo(ctx)
		readied = true
		return
	}
	// FTLAUNCH_DEBUG_RAFT_LOG=PATH: raft's own log of the front-end's
	// replica, at debug level, appended to PATH.NODE (why it stepped
	// down, whom it asked for votes: docs/testing.md).
	lg := j.cfg.Logger
	if p := os.Getenv("FTLAUNCH_DEBUG_RAFT_LOG"); p != "" && lg == nil {
		if f, err := os.OpenFile(p+"."+j.cfg.Node, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			defer f.Close()
			lg = hclog.New(&hclog.LoggerOptions{Output: f, Level: hclog.Debug, Name: j.cfg.Node})
		}
	}
	r, err := raftstore.Open(raftstore.Config{
		StateDir:  j.jobDir,
		Name:      j.cfg.Node,
		Transport: j.cfg.Transport,
		Peers:     j.cfg.Peers,
		Timing:    j.cfg.Timing,
		Logger:    lg,
		InMemory:  j.memory != nil,
	})
	if err != nil {
		j.setErr(fmt.Errorf("journal: %w", err))
		return
	}
	j.replica = r
	j.mu.Lock()
	j.stats.Opened = time.Since(j.opened)
	j.mu.Unlock()
	shutdown := func() {
		if err := r.Shutdown(); err != nil {
			j.setErr(fmt.Errorf("journal: %w", err))
		}
	}
	defer shutdown()
	if err := j.awaitLeadership(startCtx, ctx, r); err != nil {
		if errors.Is(err, errClosedAlone) {
			// Closed before the group formed: its only member writes
			// the log alone, without waiting for an election.
			shutdown()
			j.replica = nil
			j.runSolo(ctx)
			readied = true
			return
		}
		j.setErr(fmt.Errorf("journal: %w", err))
		return
	}
	w := newWriter(j, r)
	if err := w.setJob(ctx); err != nil {
		j.setErr(err)
		return
	}
	j.mu.Lock()
	j.stats.Leading = time.Since(j.opened)
	j.mu.Unlock()
	close(j.ready)
	readied = true
	w.loop(ctx)
	endFinal()
	if keep := j.cfg.KeepForFollowers; keep > 0 && j.isClosing() {
		// The followers get the end of the log from this leader (the
		// deferred shutdown follows).
		t := time.NewTimer(keep)
		defer t.Stop()
		select {
		case <-j.kept:
		case <-t.C:
		case <-ctx.Done():
		}
	}
}

// hold waits for the end of Config.Hold (or Close); it reports false if
// ctx ended first.
func (j *Journal) hold(ctx context.Context) bool {
	h := j.cfg.Hold
	if h == nil {
		return true
	}
	select {
	case <-h:
	case <-j.release:
	case <-ctx.Done():
		return false
	}
	return true
}

// runSolo is run's body for a solo log: it opens the log at once (a
// single voter leads from the start, and opening a bbolt file costs the
// launch no CPU to speak of: it waits for the disk), closes ready, and
// after the Hold writes until Close; the job's record goes with the first
// flush.
func (j *Journal) runSolo(ctx context.Context) {
	s, err := raftstore.OpenSolo(raftstore.SoloConfig{StateDir: j.jobDir, Name: j.cfg.Node, InMemory: j.memory != nil})
	if err != nil {
		j.setErr(fmt.Errorf("journal: %w", err))
		close(j.ready)
		return
	}
	j.solo = s
	j.mu.Lock()
	j.stats.Alone = !j.cfg.Solo
	j.mu.Unlock()
	defer func() {
		if err := s.Close(); err != nil {
			j.setErr(fmt.Errorf("journal: %w", err))
		}
	}()
	j.mu.Lock()
	j.stats.Opened = time.Since(j.opened)
	j.stats.Leading = j.stats.Opened
	j.mu.Unlock()
	close(j.ready)
	if !j.hold(ctx) {
		return
	}
	w := newWriter(j, nil)
	w.solo, w.job = s, true
	w.loop(ctx)
}

// errClosedAlone: Close came before the replica led a group of one.
var errClosedAlone = errors.New("closed before the replica led")

// alone reports whether the journal's replica starts a group of its own:
// itself the only peer (replicas may join once it leads).
func (j *Journal) alone() bool {
	p := j.cfg.Peers
	return j.cfg.Replica == nil && len(p) == 1 && p[0].ID == raft.ServerID(j.cfg.Node)
}

func (j *Journal) isClosing() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.closing
}

// awaitLeadership waits until r leads. If Close comes first and the
// replica is alone (nobody can have joined a replica that never led), it
// returns errClosedAlone.
func (j *Journal) awaitLeadership(startCtx, ctx context.Context, r *raftstore.Replica) error {
	timeout := time.NewTimer(j.cfg.ElectTimeout)
	defer timeout.Stop()
	var closed <-chan struct{}
	if j.alone() {
		closed = j.release
	}
	for {
		select {
		case <-closed:
			return errClosedAlone
		case l, ok := <-r.Leadership():
			if !ok {
				return errors.New("replica shut down before it led")
			}
			if l.IsLeader {
				return nil
			}
		case <-timeout.C:
			return fmt.Errorf("replica %s did not lead within %v", j.cfg.Node, j.cfg.ElectTimeout)
		case <-startCtx.Done():
			return fmt.Errorf("waiting for replica %s to lead: %w", j.cfg.Node, startCtx.Err())
		case <-ctx.Done():
			return fmt.Errorf("waiting for replica %s to lead: %w", j.cfg.Node, ctx.Err())
		}
	}
}

// Replica returns the journal's replica once it leads (nil before, and
// after a failed start). Tests and benchmarks use it to look at raft.
func (j *Journal) Replica() *raftstore.Replica {
	select {
	case <-j.ready:
		return j.replica
	default:
		return nil
	}
}

// Members is the replica group as the journal's replica has it: its
// voters' raft IDs and how many servers it has (voters or not); ok is
// false before the replica leads, or when its configuration cannot be
// read.
func (j *Journal) Members() (voters []string, servers int, ok bool) {
	r := j.Replica()
	if r == nil {
		return nil, 0, false
	}
	f := r.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil, 0, false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			voters = append(voters, string(srv.ID))
		}
	}
	return voters, len(f.Configuration().Servers), true
}

// FSM returns the state machine the journal writes through once its
// replica (or solo log) is ready, nil before and after a failed start.
// Tests read the state with it.
func (j *Journal) FSM() *raftstore.FSM {
	select {
	case <-j.ready:
	default:
		return nil
	}
	switch {
	case j.solo != nil:
		return j.solo.FSM()
	case j.replica != nil:
		return j.replica.FSM()
	}
	return nil
}

// encodeJob is the job's raftstore spec.
func encodeJob(job Job) []byte {
	b, err := json.Marshal(job)
	if err != nil {
		panic(fmt.Sprintf("journal: encode job: %v", err)) // plain data: cannot fail
	}
	return b
}
