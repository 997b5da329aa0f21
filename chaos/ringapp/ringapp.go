// Package ringapp is the recovery application (`ftlaunch ringapp`, not in
// the help): a rank program that shows and tests ftlaunch's restart
// protocol. The ranks pass values around a ring of direct TCP connections
// (rank r sends to r+1 and receives from r-1), mix them into a value per
// rank and step, checkpoint every few steps, and at the end rank 0 prints
// "checksum C expected E", where E is the same computation simulated in
// one process; it exits 0 iff they are equal. A lost or doubly applied
// step changes C.
//
// Under `ftlaunch run --restart rank` a rank that is replaced costs a
// rollback: the survivors suspend at a safe point when told (Suspend),
// and once resumed every rank (the new one too) agrees through one
// allgather on the last step at which every rank has a checkpoint, loads
// it, reconnects the ring and goes on. Checkpoints are files in --dir, so
// a rank started again under `--restart job` resumes the same way.
//
// The chaos harness runs it under --restart rank and job, and the
// recovery tests of cmd/ftlaunch run it through the ftlaunch binary.
package ringapp

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/client"
)

// Main is `ftlaunch ringapp ARGS...`: it parses the flags, runs the
// application as one rank and returns its exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftlaunch ringapp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg ringConfig
	fs.IntVar(&cfg.steps, "steps", 150, "")
	fs.DurationVar(&cfg.stepTime, "step-time", 20*time.Millisecond, "")
	fs.IntVar(&cfg.every, "checkpoint-every", 5, "")
	fs.StringVar(&cfg.dir, "dir", "", "")
	fs.Uint64Var(&cfg.seed, "seed", 1, "")
	fs.DurationVar(&cfg.wait, "recovery-wait", 30*time.Second, "")
	hold := fs.Int("hold-rank", -1, "")
	fs.StringVar(&cfg.finish, "finish-file", "", "")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, ringAppUsage)
		return 0
	} else if err != nil {
		fmt.Fprintf(stderr, "ftlaunch ringapp: %v\n", err)
		return 2
	}
	cfg.hold, cfg.holding = *hold, *hold >= 0
	if err := cfg.check(fs.NArg()); err != nil {
		fmt.Fprintf(stderr, "ftlaunch ringapp: %v\n", err)
		return 2
	}
	c, err := client.Init()
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch ringapp: init: %v\n", err)
		return 1
	}
	defer c.Close()
	ok, err := ringAppRun(c, cfg, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch ringapp: %v\n", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

const ringAppUsage = `ftlaunch ringapp: the recovery application (run it under ftlaunch run)

Usage: ftlaunch run [flags] -n N ftlaunch ringapp [flags]
  --steps N              steps to compute (default 150: about 3 s)
  --step-time D          the work of a step (default 20ms)
  --checkpoint-every K   steps between checkpoints (default 5)
  --dir PATH             checkpoint directory (default: under the temporary
                         directory, by job id, removed at the end)
  --seed S               the initial values' seed (default 1)
  --recovery-wait D      how long a rank waits for a recovery to begin or
                         end, or for a neighbour (default 30s)
  --hold-rank R          for tests of a failure during a collective: rank R's
                         first incarnation, done with its steps, creates
                         .hold-rR (R in 6 digits) in the checkpoint directory
                         and waits outside the final allgather, which the
                         others enter, until a recovery ran (another rank
                         failed: at most --recovery-wait)
  --finish-file PATH     for tests: a rank done with its steps waits until PATH
                         exists before the final allgather (following any
                         recovery meanwhile), so the job ends when the test says

Rank 0 prints "checksum C expected E"; the exit code is 0 iff C == E.
`

// ringConfig is ringapp's flags.
type ringConfig struct {
	steps    int           // --steps: steps to compute
	stepTime time.Duration // --step-time: the work of a step
	every    int           // --checkpoint-every: steps between checkpoints
	dir      string        // --dir: the checkpoint directory ("": under os.TempDir, by job)
	seed     uint64        // --seed: the initial values' seed
	wait     time.Duration // --recovery-wait: bound on each wait for the launcher or a peer
	hold     int           // --hold-rank: the rank that waits for a recovery before the end,
	holding  bool          // if set
	finish   string        // --finish-file: done with its steps, a rank waits for this file ("": not)
}

func (cfg *ringConfig) check(nargs int) error {
	switch {
	case nargs != 0:
		return errors.New("unexpected arguments")
	case cfg.steps < 0:
		return fmt.Errorf("--steps %d: want 0 or more", cfg.steps)
	case cfg.every < 1:
		return fmt.Errorf("--checkpoint-every %d: want 1 or more", cfg.every)
	case cfg.stepTime < 0:
		return fmt.Errorf("--step-time %v: want 0 or more", cfg.stepTime)
	case cfg.wait <= 0:
		return fmt.Errorf("--recovery-wait %v: want more than 0", cfg.wait)
	}
	return nil
}

// errRingInterrupted says the ring stopped for a recovery: a Suspend came,
// or a neighbour's connection failed (the reason is in ringApp.lost).
var errRingInterrupted = errors.New("ring interrupted")

// ringApp is one rank of the application.
type ringApp struct {
	c           *client.Client
	cfg         ringConfig
	stdout, log io.Writer
	rank, size  int
	inc         uint64
	events      <-chan client.Event
	ckpt        *ckptStore
	acc         *ringAcceptor
	addr        string

	// The recovery protocol's state.
	suspended    bool   // a Suspend was acknowledged; no Resume yet
	suspendEpoch uint64 // the newest Suspend's epoch
	needRollback bool   // resumed (or started again): agree on a rollback first
	held         bool   // --hold-rank: this rank held once
	inColl       string // the collective this rank is in, if any, for the log
	lost         string // why the ring failed, when it did without a Suspend
	cause        string // what began the recovery under way, for its log line
	recoveries   int

	// The ring.
	round uint64   // the ring's round: one more with every rollback agreement
	incs  []uint64 // every rank's incarnation as of the last agreement (nil before)
	out   net.Conn // to the right neighbour
	in    *inLink  // from the left neighbour

	step  int
	value uint64
}

// ringAppRun runs one rank; it reports (on rank 0) whether the checksum
// was the expected one.
func ringAppRun(c *client.Client, cfg ringConfig, stdout, stderr io.Writer) (bool, error) {
	a := &ringApp{c: c, cfg: cfg, stdout: stdout, log: stderr, rank: c.Rank(), size: c.Size(), inc: c.Incarnation()}
	defaultDir := cfg.dir == ""
	if defaultDir {
		a.cfg.dir = filepath.Join(os.TempDir(), "ftlaunch-ringapp-"+safeName(c.JobID()))
	}
	if err := os.MkdirAll(a.cfg.dir, 0o755); err != nil {
		return false, fmt.Errorf("rank %d: checkpoint directory: %w", a.rank, err)
	}
	a.ckpt = newCkptStore(a.cfg.dir, a.rank, a.size, cfg.every, cfg.seed)
	a.ckpt.removeTemps()
	a.events = c.Events()

	ln, err := net.Listen("tcp", net.JoinHostPort(ringListenHost(), "0"))
	if err != nil {
		return false, fmt.Errorf("rank %d: listen: %w", a.rank, err)
	}
	a.addr = ln.Addr().String()
	a.acc = startRingAcceptor(ln, 5*time.Second)
	defer a.acc.stop()
	defer a.closeRing()

	a.value = ringStart(cfg.seed, a.rank)
	// Started again: the others went on without this rank, unless it was
	// started again alone before any rank published (killed before it
	// opened the rank protocol): then everyone starts from step 0.
	a.needRollback = a.inc > 1 && !c.Info().Alone
	if a.needRollback {
		a.cause = fmt.Sprintf("incarnation %d started", a.inc)
	}
	if err := a.publish(); err != nil {
		return false, err
	}
	ok, err := a.loop()
	if err == nil && defaultDir {
		a.ckpt.removeAll()
	}
	return ok, err
}

func (a *ringApp) logf(format string, args ...any) {
	fmt.Fprintf(a.log, "ringapp rank %d: "+format+"\n", append([]any{a.rank}, args...)...)
}

// safeName keeps a job id usable as a file name.
func safeName(s string) string {
	if s == "" {
		return "nojob"
	}
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// ringListenHost is the address other ranks reach this one at: the one
// the node's hostname resolves to, or loopback.
func ringListenHost() string {
	host, err := os.Hostname()
	if err != nil {
		return "127.0.0.1"
	}
	addrs, err := net.LookupHost(host)
	if err != nil {
		return "127.0.0.1"
	}
	for _, s := range addrs {
		if ip := net.ParseIP(s); ip != nil && ip.To4() != nil && !ip.IsLoopback() {
			return s
		}
	}
	return "127.0.0.1"
}

// publish contributes the rank's address and gets the node table. A
// recovery that interrupts it leaves no table to reconnect with: the
// survivors call it again once resumed; a rank started again (whose
// Publish the agent answers at resume time) and not told of the recovery
// retries after a pause.
func (a *ringApp) publish() error {
	start := time.Now()
	for {
		_, err := a.collective("the publication of its address", func() ([][]byte, error) { return a.c.Publish([]byte(a.addr)) })
		if err == nil {
			return nil
		}
		if !errors.Is(err, client.ErrRecovering) {
			return fmt.Errorf("rank %d: publish: %w", a.rank, err)
		}
		if a.inc > 1 && !a.suspended && a.recoveries == 0 {
			if time.Since(start) > a.cfg.wait {
				return fmt.Errorf("rank %d: publish: still refused (a recovery runs) after %v", a.rank, a.cfg.wait)
			}
			if err := a.pause(100 * time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err := a.waitRecovery("publish interrupted by a recovery"); err != nil {
			return err
		}
	}
}

// pause waits d, handling the events that come meanwhile.
func (a *ringApp) pause(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return nil
		case ev, ok := <-a.events:
			if !ok {
				return a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return err
			}
		}
	}
}

// loop runs the job from the node table to the checksum, going through a
// rollback after every recovery.
func (a *ringApp) loop() (bool, error) {
	for {
		if a.needRollback {
			if err := a.rollback(); errors.Is(err, client.ErrRecovering) {
				if err := a.waitRecovery("the rollback agreement was interrupted"); err != nil {
					return false, err
				}
				continue
			} else if err != nil {
				return false, err
			}
		}
		if a.suspended {
			// A recovery began as the agreement completed: another one.
			if err := a.waitRecovery("suspended"); err != nil {
				return false, err
			}
			continue
		}
		err := a.connect()
		if err == nil {
			err = a.runSteps()
		}
		if errors.Is(err, errRingInterrupted) {
			if err := a.waitRecovery(a.lost); err != nil {
				return false, err
			}
			continue
		} else if err != nil {
			return false, err
		}
		if a.cfg.finish != "" {
			interrupted, err := a.awaitFinish()
			if err != nil {
				return false, err
			}
			if interrupted {
				if err := a.waitRecovery(fmt.Sprintf("suspended in the wait for --finish-file at step %d", a.step)); err != nil {
					return false, err
				}
				continue
			}
		}
		if a.cfg.holding && a.rank == a.cfg.hold && a.inc == 1 && !a.held {
			if err := a.holdForRecovery(); err != nil {
				return false, err
			}
			continue
		}
		vals, err := a.collective("the final allgather", func() ([][]byte, error) {
			return a.c.Allgather(binary.BigEndian.AppendUint64(nil, a.value))
		})
		if errors.Is(err, client.ErrRecovering) {
			if err := a.waitRecovery(fmt.Sprintf("the final allgather was interrupted by a recovery at step %d", a.step)); err != nil {
				return false, err
			}
			continue
		} else if err != nil {
			return false, fmt.Errorf("rank %d: final allgather: %w", a.rank, err)
		}
		return a.finish(vals)
	}
}

// awaitFinish is --finish-file: the rank, done with its steps, waits for
// the file to exist before the final allgather, so that a test decides
// when the job may end (its faults and recoveries fall while the job
// runs, however fast the steps went). A recovery that begins meanwhile
// interrupts the wait (interrupted: the rank is suspended).
func (a *ringApp) awaitFinish() (interrupted bool, err error) {
	a.inColl = "the wait for --finish-file" // a Suspend's cause names it
	defer func() { a.inColl = "" }()
	poll := time.NewTicker(finishPoll)
	defer poll.Stop()
	for {
		if _, err := os.Stat(a.cfg.finish); err == nil {
			return false, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("rank %d: --finish-file: %w", a.rank, err)
		}
		select {
		case ev, ok := <-a.events:
			if !ok {
				return false, a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return false, err
			}
			if a.suspended {
				return true, nil
			}
		case <-poll.C:
		}
	}
}

// finishPoll is how often a rank waiting for --finish-file looks for it.
const finishPoll = 20 * time.Millisecond

// holdForRecovery is --hold-rank: the rank says it is done with its
// steps (a file) and waits for a recovery to run, so that the others wait
// for it in the final allgather while a rank is killed.
func (a *ringApp) holdForRecovery() error {
	a.held = true
	f := filepath.Join(a.cfg.dir, fmt.Sprintf(".hold-r%06d", a.rank))
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		return fmt.Errorf("rank %d: --hold-rank: %w", a.rank, err)
	}
	return a.waitRecovery(fmt.Sprintf("held at step %d before the final allgather (--hold-rank)", a.step))
}

// finish checks the final values; rank 0 prints the checksum line.
func (a *ringApp) finish(vals [][]byte) (bool, error) {
	final := make([]uint64, len(vals))
	for r, v := range vals {
		if len(v) != 8 {
			return false, fmt.Errorf("rank %d: final allgather: rank %d sent %d bytes", a.rank, r, len(v))
		}
		final[r] = binary.BigEndian.Uint64(v)
	}
	got, want := ringChecksum(final), ringExpected(a.size, a.cfg.steps, a.cfg.seed)
	if a.rank == 0 {
		if _, err := fmt.Fprintf(a.stdout, "checksum %016x expected %016x\n", got, want); err != nil {
			return false, fmt.Errorf("rank 0: write the checksum: %w", err)
		}
	}
	return got == want, nil
}

// collective makes one call to the agent, handling recovery events while
// it waits: a Suspend that comes is acknowledged at once (a rank inside a
// collective talks to no peer); the call then ends with ErrRecovering.
// what names the collective in the recovery's log line.
func (a *ringApp) collective(what string, call func() ([][]byte, error)) ([][]byte, error) {
	a.inColl = what
	defer func() { a.inColl = "" }()
	type result struct {
		vals [][]byte
		err  error
	}
	done := make(chan result, 1)
	go func() { // ends with the call: the agent answers, or the connection ends
		v, err := call()
		done <- result{v, err}
	}()
	events := a.events
	var herr error
	for {
		select {
		case r := <-done:
			if herr != nil {
				return nil, herr
			}
			return r.vals, r.err
		case ev, ok := <-events:
			if !ok {
				events = nil // the call fails too
				continue
			}
			if err := a.handle(ev); err != nil && herr == nil {
				herr = err
			}
		}
	}
}

// handle follows one recovery event.
func (a *ringApp) handle(ev client.Event) error {
	switch ev.Type {
	case client.Suspend:
		a.closeRing()
		if err := a.c.Ack(ev); err != nil {
			return fmt.Errorf("rank %d: %w", a.rank, err)
		}
		if a.cause == "" && a.inColl != "" {
			a.cause = fmt.Sprintf("suspended in %s at step %d", a.inColl, a.step)
		} else if a.cause == "" {
			a.cause = fmt.Sprintf("suspended at step %d", a.step)
		}
		a.suspended = true
		a.suspendEpoch = max(a.suspendEpoch, ev.Epoch)
	case client.Patch:
		// The client holds the new rows and acknowledged them; the ring
		// reconnects after the rollback agreement.
	case client.Resume:
		if a.suspended && ev.Epoch >= a.suspendEpoch {
			a.suspended = false
			a.needRollback = true
			a.recoveries++
		}
		// Otherwise it ends a recovery this rank was not suspended for
		// (the one that started it).
	}
	return nil
}

func (a *ringApp) agentGone() error {
	return fmt.Errorf("rank %d: the connection to the agent ended", a.rank)
}

// waitRecovery closes the ring and waits until a recovery ran to its
// Resume: for a Suspend (bounded by --recovery-wait after why happened),
// then for the Resume (bounded the same after the Suspend).
func (a *ringApp) waitRecovery(why string) error {
	a.closeRing()
	if a.cause == "" {
		a.cause = why
	}
	limit := time.NewTimer(a.cfg.wait)
	defer limit.Stop()
	for a.suspended || !a.needRollback {
		select {
		case ev, ok := <-a.events:
			if !ok {
				return a.agentGone()
			}
			was := a.suspended
			if err := a.handle(ev); err != nil {
				return err
			}
			if a.suspended && !was {
				limit.Reset(a.cfg.wait)
			}
		case <-limit.C:
			if a.suspended {
				return fmt.Errorf("rank %d: suspended (recovery epoch %d) and not resumed within %v", a.rank, a.suspendEpoch, a.cfg.wait)
			}
			return fmt.Errorf("rank %d: %s, and no recovery began within %v (is the job run with --restart rank?)", a.rank, why, a.cfg.wait)
		}
	}
	return nil
}

// rollback agrees with every rank on the step to go back to, and loads
// this rank's value at that step.
func (a *ringApp) rollback() error {
	steps, foreign, err := a.ckpt.list()
	if err != nil {
		return fmt.Errorf("rank %d: %w", a.rank, err)
	}
	if foreign > 0 {
		a.logf("ignored %d checkpoints of another run in %s", foreign, a.cfg.dir)
	}
	mine := ringAgreement{inc: a.inc, round: a.round, steps: steps}
	a.needRollback = false // a Resume during the call sets it again
	vals, err := a.collective("the rollback agreement", func() ([][]byte, error) { return a.c.Allgather(mine.encode()) })
	if err != nil {
		if errors.Is(err, client.ErrRecovering) {
			return err
		}
		return fmt.Errorf("rank %d: rollback agreement: %w", a.rank, err)
	}
	step, round, incs, err := agree(vals)
	if err != nil {
		return fmt.Errorf("rank %d: rollback agreement: %w", a.rank, err)
	}
	v, err := a.ckpt.load(step)
	if err != nil {
		return fmt.Errorf("rank %d: roll back to step %d: %w", a.rank, step, err)
	}
	// The recovery's one line on stderr.
	epoch := ""
	if a.suspendEpoch > 0 { // a rank started again was not told
		epoch = fmt.Sprintf("recovery epoch %d: ", a.suspendEpoch)
	}
	a.logf("%s; %srolls back from step %d to step %d (ring round %d)", a.cause, epoch, a.step, step, round)
	a.cause = ""
	a.step, a.value, a.round, a.incs = step, v, round, incs
	return nil
}

// closeRing closes both neighbour connections.
func (a *ringApp) closeRing() {
	if a.out != nil {
		a.out.Close()
		a.out = nil
	}
	if a.in != nil {
		a.in.close()
		a.in = nil
	}
}

func (a *ringApp) interrupted(format string, args ...any) error {
	a.lost = fmt.Sprintf(format, args...)
	return errRingInterrupted
}

// connect connects to the right neighbour and takes the left one's
// connection for this round. A neighbour that cannot be reached interrupts
// the ring: a recovery is expected.
func (a *ringApp) connect() error {
	if a.size == 1 || a.cfg.steps == a.step {
		return nil
	}
	a.closeRing()
	right, left := (a.rank+1)%a.size, (a.rank-1+a.size)%a.size
	table := a.c.NodeTable()
	if len(table) != a.size {
		return fmt.Errorf("rank %d: node table of %d rows for %d ranks", a.rank, len(table), a.size)
	}
	conn, err := net.DialTimeout("tcp", string(table[right]), 5*time.Second)
	if err != nil {
		return a.interrupted("cannot reach the right neighbour, rank %d: %v", right, err)
	}
	conn.SetWriteDeadline(time.Now().Add(a.cfg.wait))
	if _, err := conn.Write(ringHello{uint32(a.rank), a.inc, a.round}.encode()); err != nil {
		conn.Close()
		return a.interrupted("cannot reach the right neighbour, rank %d: %v", right, err)
	}
	a.out = conn

	limit := time.NewTimer(a.cfg.wait)
	defer limit.Stop()
	for {
		select {
		case hc := <-a.acc.conns:
			h := hc.hello
			if int(h.rank) == left && h.round == a.round && (a.incs == nil || h.inc == a.incs[left]) {
				a.in = startInLink(hc)
				return nil
			}
			hc.conn.Close() // of an earlier round, or an earlier incarnation
		case ev, ok := <-a.events:
			if !ok {
				return a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return err
			}
			if a.suspended {
				return a.interrupted("suspended while connecting")
			}
		case <-a.acc.done:
			return fmt.Errorf("rank %d: accept: %w", a.rank, a.acc.err)
		case <-limit.C:
			return fmt.Errorf("rank %d: the left neighbour, rank %d, did not connect within %v", a.rank, left, a.cfg.wait)
		}
	}
}

// pollEvents handles the events already there; it reports whether the
// rank is now suspended.
func (a *ringApp) pollEvents() (bool, error) {
	for {
		select {
		case ev, ok := <-a.events:
			if !ok {
				return false, a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return false, err
			}
		default:
			return a.suspended, nil
		}
	}
}

// runSteps computes the steps left. Each step sends this rank's value to
// the right, works, takes the left neighbour's value of the step before
// and mixes; every --checkpoint-every steps the value is saved.
func (a *ringApp) runSteps() error {
	work := time.NewTimer(0)
	defer work.Stop()
	<-work.C
	for a.step < a.cfg.steps {
		if suspended, err := a.pollEvents(); err != nil {
			return err
		} else if suspended {
			return a.interrupted("suspended")
		}
		s := a.step + 1
		if a.out != nil {
			a.out.SetWriteDeadline(time.Now().Add(a.cfg.wait))
			if _, err := a.out.Write(ringMsg{uint64(a.step), a.inc, a.value}.encode()); err != nil {
				return a.interrupted("lost the right neighbour at step %d: %v", s, err)
			}
		}
		if a.cfg.stepTime > 0 {
			work.Reset(a.cfg.stepTime)
			if err := a.await(work.C); err != nil {
				return err
			}
		}
		left := a.value // one rank: its own left neighbour
		if a.in != nil {
			var err error
			if left, err = a.receive(uint64(a.step)); err != nil {
				return err
			}
		}
		a.value = ringMix(a.rank, s, a.value, left)
		a.step = s
		if s%a.cfg.every == 0 {
			if err := a.ckpt.write(s, a.value); err != nil {
				return fmt.Errorf("rank %d: %w", a.rank, err)
			}
		}
	}
	return nil
}

// await waits for c (the step's work), handling events meanwhile.
func (a *ringApp) await(c <-chan time.Time) error {
	for {
		select {
		case <-c:
			return nil
		case ev, ok := <-a.events:
			if !ok {
				return a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return err
			}
			if a.suspended {
				return a.interrupted("suspended")
			}
		}
	}
}

// receive returns the left neighbour's value at step, dropping older
// messages and those of another incarnation.
func (a *ringApp) receive(step uint64) (uint64, error) {
	stall := time.NewTimer(a.cfg.wait)
	defer stall.Stop()
	left := (a.rank - 1 + a.size) % a.size
	for {
		select {
		case r := <-a.in.msgs:
			if r.err != nil {
				return 0, a.interrupted("lost the left neighbour, rank %d, waiting for its step %d: %v", left, step, r.err)
			}
			switch {
			case r.msg.inc != a.in.inc || r.msg.step < step:
				continue // a duplicate, or from before
			case r.msg.step > step:
				return 0, fmt.Errorf("rank %d: the left neighbour sent step %d, want %d", a.rank, r.msg.step, step)
			}
			return r.msg.value, nil
		case ev, ok := <-a.events:
			if !ok {
				return 0, a.agentGone()
			}
			if err := a.handle(ev); err != nil {
				return 0, err
			}
			if a.suspended {
				return 0, a.interrupted("suspended")
			}
		case <-stall.C:
			return 0, fmt.Errorf("rank %d: no value from the left neighbour, rank %d, for step %d within %v", a.rank, left, step, a.cfg.wait)
		}
	}
}
