package raftstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// DBFile is the name of a replica's bbolt database in its directory: a
// directory holding one is a replica's.
const DBFile = dbFile

// Files under a replica's directory STATE/<node-name>/.
const (
	dbFile      = "raft.db"   // bbolt: raft log, stable store, ftlaunch metadata
	snapshotDir = "snapshots" // raft.FileSnapshotStore's directory (named by raft)
)

// lockTimeout bounds how long Open and OpenReadOnly wait for a database
// another process holds.
const lockTimeout = 100 * time.Millisecond

// Timing holds raft's timers for a replica group.
// LeaderLeaseTimeout <= HeartbeatTimeout <= ElectionTimeout.
type Timing struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
}

// DefaultTiming returns the timers for a group of the given number of
// voters. A single voter has no peer to suspect falsely and elects itself
// within 1-2 heartbeat timeouts of starting, so its timers are 10 ms
// (raft's floor is 5 ms), its lease as long as raft allows (the heartbeat
// timeout): a leader checks its lease every lease timeout for as long as it
// leads, which for the job's single voter is the whole job (10 ms: 100
// wake-ups a second instead of 200); a group grown from a
// single voter must raise them (Raft().ReloadConfig). A group of 3 or 5 uses heartbeat = election = lease = 275 ms:
// a new leader in well under a second after the old one dies (raft's
// defaults, 1 s and 500 ms, take 1-2 s), and a lease as long as raft
// allows, so that a leader on a CPU-starved machine does not step down
// for a few late heartbeat answers: with a 125 ms lease, a front-end at a
// load of 15-20 on two cores lost the lead every few seconds (its answers
// came 100-270 ms apart), and each loss held the job's events for an
// election (issue #27, TestClusterStalledFrontEnd).
func DefaultTiming(voters int) Timing {
	if voters == 1 {
		return Timing{
			HeartbeatTimeout:   10 * time.Millisecond,
			ElectionTimeout:    10 * time.Millisecond,
			LeaderLeaseTimeout: 10 * time.Millisecond,
			CommitTimeout:      5 * time.Millisecond,
		}
	}
	return Timing{
		HeartbeatTimeout:   275 * time.Millisecond,
		ElectionTimeout:    275 * time.Millisecond,
		LeaderLeaseTimeout: 275 * time.Millisecond,
		CommitTimeout:      10 * time.Millisecond,
	}
}

// Config configures a Replica.
type Config struct {
	// StateDir is the state directory; the replica's files go under
	// StateDir/Name/.
	StateDir string
	// Name is the node name; it is also the raft server ID.
	Name string
	// Transport carries raft's RPCs (NewTCPTransport over the launcher's
	// TLS stream layer, or raft.NewInmemTransport in tests). The caller
	// owns it and closes it after Shutdown.
	Transport raft.Transport
	// Peers are the initial voters, this replica included. A replica whose
	// directory holds no raft state bootstraps with them; every initial
	// member must be given the same list. Empty: wait to be added by a
	// leader.
	Peers []raft.Server
	// Timing: zero means DefaultTiming(len(Peers)) (0 counts as a group).
	Timing Timing
	// ApplyTimeout bounds Apply, VerifyLeader and Barrier when their
	// context has no deadline. Zero means 10 s.
	ApplyTimeout time.Duration
	// SnapshotThreshold, TrailingLogs, SnapshotInterval: raft's (zero
	// means 256 entries, 512 entries, 30 s; entries are large batches).
	SnapshotThreshold uint64
	TrailingLogs      uint64
	SnapshotInterval  time.Duration
	// Logger receives raft's log; nil discards it.
	Logger hclog.Logger
	// InMemory keeps the raft log, the stable store and the snapshots in
	// memory (StateDir is not used, and nothing outlives Shutdown): for a
	// job whose state directory cannot be written.
	InMemory bool
}

// Leadership is one change of this replica's view of the leader.
type Leadership struct {
	Seq        uint64 // 1, 2, 3, ... without gaps
	IsLeader   bool   // this replica is now the leader
	Leader     raft.ServerID
	LeaderAddr raft.ServerAddress
	Term       uint64 // the replica's current term when the change was seen
}

// Fence is what a root puts on every command it sends down: agents refuse
// commands with a lower (Term, Epoch, Version) than the newest they saw.
type Fence struct {
	Term    uint64
	Epoch   uint64
	Version uint64
}

// Replica is one member of a job's root replica group: a raft server
// with the job's FSM.
//
// Threading: every method may be called from any goroutine. Leadership
// changes are delivered on one channel to one consumer.
type Replica struct {
	cfg   Config
	dir   string
	fsm   *FSM
	store io.Closer // the bbolt database (nil: in memory)
	raft  *raft.Raft
	obs   *raft.Observer

	leaderOut chan Leadership
	stop      chan struct{}

	// leaderless is when this replica last saw the group go without a
	// leader it knows (itself or another), zero while it knows one.
	leaderMu   sync.Mutex
	leaderless time.Time

	mu      sync.Mutex // guards closing and wg.Add against Shutdown
	closing bool
	wg      sync.WaitGroup

	shutdownOnce sync.Once
	shutdownErr  error
}

// Open opens or creates the replica's directory and starts its raft
// server. If another process holds the directory it fails with ErrLocked.
func Open(cfg Config) (*Replica, error) {
	if cfg.StateDir == "" && !cfg.InMemory || cfg.Name == "" || cfg.Name == "." || cfg.Name == ".." || strings.ContainsAny(cfg.Name, `/\`) {
		return nil, fmt.Errorf("raftstore: open: need a state directory and a plain node name (got %q, %q)", cfg.StateDir, cfg.Name)
	}
	if cfg.Transport == nil {
		return nil, errors.New("raftstore: open: no transport")
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming(len(cfg.Peers))
	}
	if cfg.ApplyTimeout <= 0 {
		cfg.ApplyTimeout = 10 * time.Second
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 256
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 512
	}
	if cfg.SnapshotInterval <= 0 {
		cfg.SnapshotInterval = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.InMemory {
		mem := raft.NewInmemStore()
		r, err := start(cfg, "", mem, mem, raft.NewInmemSnapshotStore(), nil)
		if err != nil {
			return nil, fmt.Errorf("raftstore: open %s in memory: %w", cfg.Name, err)
		}
		return r, nil
	}
	dir := filepath.Join(cfg.StateDir, cfg.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dir, err)
	}
	dbPath := filepath.Join(dir, dbFile)
	if err := initMeta(dbPath, cfg.Name); err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dbPath, err)
	}
	store, err := raftboltdb.New(raftboltdb.Options{Path: dbPath, BoltOptions: &bbolt.Options{Timeout: lockTimeout}})
	if err != nil {
		return nil, fmt.Errorf("raftstore: open %s: %w", dbPath, lockErr(err))
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, cfg.Logger.Named("snapshots"))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raftstore: open %s: snapshot store: %w", dir, err), store.Close())
	}
	r, err := start(cfg, dir, store, store, snaps, store)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("raftstore: open %s: %w", dir, err), store.Close())
	}
	return r, nil
}

// start creates the raft server on its stores; closer (if not nil) is
// closed by Shutdown.
func start(cfg Config, dir string, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore, closer io.Closer) (*Replica, error) {
	notify := make(chan bool) // unbuffered: raft blocks until the watcher takes it, so no change is lost
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.Name)
	rc.HeartbeatTimeout = cfg.Timing.HeartbeatTimeout
	rc.ElectionTimeout = cfg.Timing.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.Timing.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.Timing.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.BatchApplyCh = true
	rc.NotifyCh = notify
	rc.Logger = cfg.Logger
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft config: %w", err)
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("look for existing state: %w", err)
	}
	if !existing && len(cfg.Peers) > 0 {
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, cfg.Transport, raft.Configuration{Servers: cfg.Peers}); err != nil {
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	fsm := NewFSM()
	ra, err := raft.NewRaft(rc, fsm, logs, stable, snaps, cfg.Transport)
	if err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	r := &Replica{
		cfg:        cfg,
		dir:        dir,
		fsm:        fsm,
		store:      closer,
		raft:       ra,
		leaderOut:  make(chan Leadership, 16),
		stop:       make(chan struct{}),
		leaderless: time.Now(),
	}
	obsCh := make(chan raft.Observation) // unbuffered, blocking: delivered in raft's order
	r.obs = raft.NewObserver(obsCh, true, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	ra.RegisterObserver(r.obs)
	r.wg.Add(1)
	go r.watchLeadership(notify, obsCh)
	return r, nil
}

// initMeta creates the ftlaunch bucket of a new database, or checks that
// an existing one belongs to this node.
func initMeta(path, name string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if err != nil {
		return lockErr(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(bucketMeta))
		if err != nil {
			return err
		}
		if f := b.Get([]byte(metaKeyFormat)); f != nil {
			m, err := readMeta(tx)
			if err != nil {
				return err
			}
			if m.Node != name {
				return fmt.Errorf("the directory belongs to node %q, not %q: %w", m.Node, name, ErrForeign)
			}
			return nil
		}
		return putMeta(b, name)
	})
	return errors.Join(err, db.Close())
}

// putMeta writes a new database's metadata: its format, its node, when it
// was created.
func putMeta(b *bbolt.Bucket, name string) error {
	var e encoder
	e.uint(formatVersion)
	if err := b.Put([]byte(metaKeyFormat), e.buf); err != nil {
		return err
	}
	if err := b.Put([]byte(metaKeyNode), []byte(name)); err != nil {
		return err
	}
	return b.Put([]byte(metaKeyCreated), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
}

// lockErr turns bbolt's lock timeout into ErrLocked.
func lockErr(err error) error {
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("%w (%v)", ErrLocked, err)
	}
	return err
}

// watchLeadership turns raft's leadership notifications and leader
// observations into an ordered, gap-free stream on r.leaderOut. It owns an
// unbounded queue, so raft never waits for the consumer; it ends when
// r.stop closes, after raft has shut down, and closes r.leaderOut.
func (r *Replica) watchLeadership(notify <-chan bool, obs <-chan raft.Observation) {
	defer r.wg.Done()
	defer close(r.leaderOut)
	self := raft.ServerID(r.cfg.Name)
	var (
		queue    []Leadership
		seq      uint64
		isLeader bool
		last     Leadership
	)
	emit := func(l Leadership) {
		seq++
		l.Seq = seq
		queue = append(queue, l)
		last = l
		r.setLeaderless(!l.IsLeader && l.Leader == "")
	}
	for {
		var out chan<- Leadership
		var head Leadership
		if len(queue) > 0 {
			out, head = r.leaderOut, queue[0]
		}
		select {
		case v := <-notify:
			if v == isLeader {
				continue // already reported from an observation
			}
			isLeader = v
			addr, id := r.raft.LeaderWithID()
			if v {
				addr, id = r.cfg.Transport.LocalAddr(), self
			}
			emit(Leadership{IsLeader: v, Leader: id, LeaderAddr: addr, Term: r.raft.CurrentTerm()})
		case o := <-obs:
			lo, _ := o.Data.(raft.LeaderObservation)
			if lo.LeaderID == self {
				continue // the notification that follows reports it
			}
			if isLeader {
				// Deposed by a newer leader's RPC: raft observes the new
				// leader before it notifies the loss.
				isLeader = false
			} else if lo.LeaderID == last.Leader && lo.LeaderAddr == last.LeaderAddr {
				continue
			}
			emit(Leadership{Leader: lo.LeaderID, LeaderAddr: lo.LeaderAddr, Term: r.raft.CurrentTerm()})
		case out <- head:
			queue = queue[1:]
		case <-r.stop:
			if isLeader {
				emit(Leadership{Term: r.raft.CurrentTerm()})
			}
			for _, l := range queue {
				select {
				case r.leaderOut <- l:
				default:
					return // the consumer stopped reading; nobody to tell
				}
			}
			return
		}
	}
}

// Leadership returns the channel of leadership changes, in order and
// without gaps: every time this replica gains or loses leadership, and
// every time it learns of another leader (or of none). Changes queue up
// (without bound) while nobody reads; the channel is closed after
// Shutdown, which also reports a last loss of leadership if needed. Only
// one goroutine should receive from it.
func (r *Replica) Leadership() <-chan Leadership { return r.leaderOut }

func (r *Replica) setLeaderless(none bool) {
	r.leaderMu.Lock()
	defer r.leaderMu.Unlock()
	switch {
	case !none:
		r.leaderless = time.Time{}
	case r.leaderless.IsZero():
		r.leaderless = time.Now()
	}
}

// Leaderless returns how long this replica has known no leader (neither
// itself nor another member), 0 while it knows one. A group that keeps a
// majority elects a leader again within a few election timeouts of losing
// one; a replica that stays leaderless much longer is cut off from the
// majority, or the group has lost it.
func (r *Replica) Leaderless() time.Duration {
	r.leaderMu.Lock()
	defer r.leaderMu.Unlock()
	if r.leaderless.IsZero() {
		return 0
	}
	return time.Since(r.leaderless)
}

// Dir returns the replica's directory, StateDir/Name ("" in memory).
func (r *Replica) Dir() string { return r.dir }

// FSM returns the replica's state machine, for reads (View, Copy, Digest).
// On a follower the state may lag the leader's.
func (r *Replica) FSM() *FSM { return r.fsm }

// Raft returns the raft server, for membership changes and statistics.
// Shut it down only through Shutdown.
func (r *Replica) Raft() *raft.Raft { return r.raft }

// Leader returns the current leader as this replica knows it, or empty
// values if it knows none.
func (r *Replica) Leader() (raft.ServerID, raft.ServerAddress) {
	addr, id := r.raft.LeaderWithID()
	return id, addr
}

// IsLeader reports whether this replica is in the leader state now. It may
// have been deposed without knowing it yet: use VerifyLeader before acting
// destructively.
func (r *Replica) IsLeader() bool { return r.raft.State() == raft.Leader }

// submit hands a request to raft and waits for its answer in a goroutine
// tracked by r.wg, so that ctx can cut the wait short. The goroutine ends
// when raft answers, which it does at the latest when it shuts down. If
// the replica is shutting down, nothing is submitted and the error is
// ErrShutdown. answered is false if ctx ended first; f is nil if nothing
// was submitted.
func (r *Replica) submit(ctx context.Context, send func() raft.Future) (f raft.Future, err error, answered bool) {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		return nil, ErrShutdown, true
	}
	r.wg.Add(1)
	r.mu.Unlock()
	f = send()
	done := make(chan error, 1)
	go func() {
		defer r.wg.Done()
		done <- futureError(f, r.stop)
	}()
	select {
	case err := <-done:
		return f, err, true
	case <-ctx.Done():
		return f, ctx.Err(), false
	}
}

// futureError waits for f's answer, or for the replica's shutdown: raft
// does not answer every future it took when it shuts down (seen with an
// apply handed over while leadership moved back and forth), and Shutdown
// must not wait for those. The waiting goroutine ends with the answer.
func futureError(f raft.Future, stop <-chan struct{}) error {
	ch := make(chan error, 1)
	go func() { ch <- f.Error() }()
	select {
	case err := <-ch:
		return err
	case <-stop:
	}
	// Raft answered what it answers before its shutdown returned (stop
	// is closed after): take that answer if there is one.
	select {
	case err := <-ch:
		return err
	case <-time.After(200 * time.Millisecond):
		return ErrShutdown
	}
}

// withTimeout applies ApplyTimeout to a context without a deadline.
func (r *Replica) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.cfg.ApplyTimeout)
}

// Apply commits a command and returns what the FSM made of it. Events and
// commands without a time get the current time, on this replica, before
// the command is replicated (the FSM never reads the clock).
//
// Errors, by what they say about the command:
//   - ErrNotLeader, ErrShutdown, or raft.ErrEnqueueTimeout: it was not
//     committed.
//   - ErrIndeterminate (wrapping raft.ErrLeadershipLost, or the context's
//     error): it may or may not have been committed, now or by a later
//     leader. Read the state from the current leader after its Barrier to
//     find out; commands are declarative, so one that did commit and is
//     applied again changes nothing but its events.
//   - ErrRefused, ErrUnknownCommand, ErrMalformed: it was committed, and
//     every replica refused it; the state is unchanged.
func (r *Replica) Apply(ctx context.Context, c Command) (*Result, error) {
	return r.ApplyOnce(ctx, c, Once{})
}

// ApplyOnce is Apply with a Once key: a command retried with the same key
// after an ErrNotLeader or ErrIndeterminate is applied at most once (a
// repeat's Result has Repeat set).
func (r *Replica) ApplyOnce(ctx context.Context, c Command, once Once) (*Result, error) {
	stamp(c, time.Now())
	data := EncodeOnce(c, once)
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	deadline, _ := ctx.Deadline()
	f, err, answered := r.submit(ctx, func() raft.Future { return r.raft.Apply(data, time.Until(deadline)) })
	if !answered {
		return nil, fmt.Errorf("raftstore: apply %T: waiting for the commit: %w: %w", c, ErrIndeterminate, err)
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: apply %T: %w", c, raftErr(err))
	}
	switch resp := f.(raft.ApplyFuture).Response().(type) {
	case *Result:
		return resp, nil
	case error:
		return nil, fmt.Errorf("raftstore: apply %T: %w", c, resp)
	default:
		return nil, fmt.Errorf("raftstore: apply %T: unexpected response %T", c, resp)
	}
}

// raftErr maps raft's errors to this package's.
func raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %w", ErrIndeterminate, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrShutdown, err)
	}
	return err
}

// stamp sets the time of a command's events (and its own) where unset.
func stamp(c Command, now time.Time) {
	now = now.UTC()
	for i := range c.events() {
		if ev := &c.events()[i]; ev.Time.IsZero() {
			ev.Time = now
		}
	}
	switch c := c.(type) {
	case *BumpEpoch:
		if c.Time.IsZero() {
			c.Time = now
		}
	case *Finish:
		if c.Time.IsZero() {
			c.Time = now
		}
	}
}

// VerifyLeader checks with a quorum that this replica is still the
// leader. It returns nil, an error wrapping ErrNotLeader, or the
// context's error.
func (r *Replica) VerifyLeader(ctx context.Context) error {
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	_, err, answered := r.submit(ctx, r.raft.VerifyLeader)
	if !answered {
		return fmt.Errorf("raftstore: verify leader: %w", err)
	}
	if errors.Is(err, raft.ErrLeadershipLost) {
		return fmt.Errorf("raftstore: verify leader: %w: %w", ErrNotLeader, err)
	}
	if err != nil {
		return fmt.Errorf("raftstore: verify leader: %w", raftErr(err))
	}
	return nil
}

// Barrier waits until every entry committed before it is applied to this
// leader's FSM.
func (r *Replica) Barrier(ctx context.Context) error {
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err, answered := r.submit(ctx, func() raft.Future { return r.raft.Barrier(time.Until(deadline)) })
	if !answered {
		return fmt.Errorf("raftstore: barrier: %w", err)
	}
	if err != nil {
		return fmt.Errorf("raftstore: barrier: %w", raftErr(err))
	}
	return nil
}

// TransferLeadership hands the lead to server id at addr (id "": to the
// most up-to-date follower, as raft picks it) and waits for the transfer,
// at most until ctx ends (ApplyTimeout if it has no deadline) or the
// replica shuts down: raft does not answer every transfer it took when it
// shuts down, and a caller waiting on the future alone would never end.
func (r *Replica) TransferLeadership(ctx context.Context, id raft.ServerID, addr raft.ServerAddress) error {
	ctx, cancel := r.withTimeout(ctx)
	defer cancel()
	_, err, answered := r.submit(ctx, func() raft.Future {
		if id == "" {
			return r.raft.LeadershipTransfer()
		}
		return r.raft.LeadershipTransferToServer(id, addr)
	})
	if !answered {
		return fmt.Errorf("raftstore: leadership transfer to %q: %w", id, err)
	}
	if err != nil {
		return fmt.Errorf("raftstore: leadership transfer to %q: %w", id, raftErr(err))
	}
	return nil
}

// Takeover is what a new leader does before it acts as root: it waits
// until it has applied everything its predecessors committed, then commits
// an epoch bump naming itself, and returns the fence its commands must
// carry. If the bump is refused (another command moved the epoch first)
// the error wraps ErrRefused and the caller may retry.
func (r *Replica) Takeover(ctx context.Context) (Fence, error) {
	if err := r.Barrier(ctx); err != nil {
		return Fence{}, fmt.Errorf("raftstore: takeover: %w", err)
	}
	var epoch uint64
	r.fsm.View(func(s *State) { epoch = s.Epoch })
	res, err := r.Apply(ctx, &BumpEpoch{ExpectEpoch: epoch, Leader: r.cfg.Name, Reason: "took over as root"})
	if err != nil {
		return Fence{}, fmt.Errorf("raftstore: takeover: %w", err)
	}
	return Fence{Term: res.Term, Epoch: res.Epoch, Version: res.Version}, nil
}

// Snapshot makes raft take a snapshot now and compact its log.
func (r *Replica) Snapshot() error {
	if err := r.raft.Snapshot().Error(); err != nil {
		return fmt.Errorf("raftstore: snapshot: %w", err)
	}
	return nil
}

// Shutdown stops raft, waits for every goroutine the replica started, and
// closes its database. It is idempotent: later calls wait for the first
// and return its result. It does not close the transport.
func (r *Replica) Shutdown() error {
	r.shutdownOnce.Do(func() {
		r.mu.Lock()
		r.closing = true
		r.mu.Unlock()
		var errs []error
		if err := r.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("raft: %w", err))
		}
		r.raft.DeregisterObserver(r.obs)
		close(r.stop)
		r.wg.Wait()
		if r.store != nil { // nil: in memory
			if err := r.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", dbFile, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			r.shutdownErr = fmt.Errorf("raftstore: shutdown %s: %w", r.cfg.Name, err)
		}
	})
	return r.shutdownErr
}

// NewTCPTransport returns raft's network transport over a stream layer
// (the launcher's mutual-TLS listener and dialer), with a pool of 3
// connections per peer and a 2 s I/O deadline. The caller closes it after
// the replica's Shutdown.
//
// Pipelined replication is off (MaxRPCsInFlight 1: one AppendEntries at a
// time per follower, raft's plain replication). raft's pipeline can
// deadlock when a follower refuses an entry (Success=false, as after a
// leadership change left it with a diverging tail): the decoder returns,
// nobody reads the pipeline's answers, the next send blocks for good,
// and that follower gets no entry again while heartbeats keep it quiet;
// the leader's Shutdown then waits forever for the stuck sender (seen by
// issue #27's stalled front-ends: a replica agent ending without the
// final status, a front-end hung after its job; grafana/pyroscope#5518
// describes the same). The job's log is a few entries a second: the
// pipeline bought nothing here.
func NewTCPTransport(stream raft.StreamLayer) *raft.NetworkTransport {
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:          stream,
		MaxPool:         3,
		MaxRPCsInFlight: 1,
		Timeout:         2 * time.Second,
		Logger:          hclog.NewNullLogger(),
	})
}
