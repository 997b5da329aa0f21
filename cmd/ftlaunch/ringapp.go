package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/client"
)

// ringAppCommand is the recovery application (`ftlaunch ringapp`, not in
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
func ringAppCommand(args []string, stdout, stderr io.Writer) int {
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

// The recurrence. v(r, 0) = ringStart(seed, r);
// v(r, s) = ringMix(r, s, v(r, s-1), v(r-1 mod N, s-1)).

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func ringStart(seed uint64, r int) uint64 {
	return splitmix64(seed ^ splitmix64(uint64(r)+0x5bd1e995))
}

func ringMix(r, s int, own, left uint64) uint64 {
	x := splitmix64(own ^ uint64(s)<<32 ^ uint64(r))
	return splitmix64(x + bits.RotateLeft64(left, 23) + 0x2545f4914f6cdd1d)
}

// ringChecksum folds the final values, in rank order.
func ringChecksum(vs []uint64) uint64 {
	c := uint64(len(vs))
	for _, v := range vs {
		c = splitmix64(c ^ v)
	}
	return c
}

// ringSimulate returns every rank's value at step steps, computed in one
// process.
func ringSimulate(size, steps int, seed uint64) []uint64 {
	cur, next := make([]uint64, size), make([]uint64, size)
	for r := range cur {
		cur[r] = ringStart(seed, r)
	}
	for s := 1; s <= steps; s++ {
		for r := range next {
			next[r] = ringMix(r, s, cur[r], cur[(r-1+size)%size])
		}
		cur, next = next, cur
	}
	return cur
}

// ringExpected is the checksum a run of size ranks must print.
func ringExpected(size, steps int, seed uint64) uint64 {
	return ringChecksum(ringSimulate(size, steps, seed))
}

// Checkpoints: one small file per rank and step, DIR/rRANK-sSTEP.ckpt,
// written to a temporary file and renamed (a rank killed while writing
// leaves a temporary file, never a torn checkpoint; no fsync: it guards
// against a process that dies, not a machine). The newest keep of a rank
// are kept: the steps at which the ranks are can differ by up to size-1,
// so keep covers the last common one.

type ckptStore struct {
	dir              string
	rank, size, keep int
	every            int
	seed             uint64
}

func newCkptStore(dir string, rank, size, every int, seed uint64) *ckptStore {
	return &ckptStore{dir: dir, rank: rank, size: size, every: every, seed: seed, keep: max(32, size/every+2)}
}

func (st *ckptStore) name(step int) string {
	return filepath.Join(st.dir, fmt.Sprintf("r%06d-s%010d.ckpt", st.rank, step))
}

func (st *ckptStore) content(step int, v uint64) string {
	return fmt.Sprintf("ringapp size %d seed %d rank %d step %d value %016x\n", st.size, st.seed, st.rank, step, v)
}

// tempPrefix starts the names of this rank's temporary files.
func (st *ckptStore) tempPrefix() string { return fmt.Sprintf(".r%06d-", st.rank) }

// write stores v as the value at step, then drops the checkpoint keep
// checkpoints older.
func (st *ckptStore) write(step int, v uint64) error {
	f, err := os.CreateTemp(st.dir, st.tempPrefix()+"*.tmp")
	if err != nil {
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	_, err = f.WriteString(st.content(step, v))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), st.name(step))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("checkpoint step %d: %w", step, err)
	}
	if old := step - st.keep*st.every; old > 0 {
		if err := os.Remove(st.name(old)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("drop checkpoint step %d: %w", old, err)
		}
	}
	return nil
}

// load reads the value at step; step 0 needs no file.
func (st *ckptStore) load(step int) (uint64, error) {
	if step == 0 {
		return ringStart(st.seed, st.rank), nil
	}
	b, err := os.ReadFile(st.name(step))
	if err != nil {
		return 0, fmt.Errorf("load checkpoint: %w", err)
	}
	v, err := st.parse(step, string(b))
	if err != nil {
		return 0, fmt.Errorf("load checkpoint %s: %w", st.name(step), err)
	}
	return v, nil
}

func (st *ckptStore) parse(step int, s string) (uint64, error) {
	var size, rank, got int
	var seed, v uint64
	n, err := fmt.Sscanf(s, "ringapp size %d seed %d rank %d step %d value %x\n", &size, &seed, &rank, &got, &v)
	if err != nil || n != 5 {
		return 0, fmt.Errorf("malformed (%v)", err)
	}
	if size != st.size || seed != st.seed || rank != st.rank || got != step {
		return 0, fmt.Errorf("of another run (size %d seed %d rank %d step %d)", size, seed, rank, got)
	}
	return v, nil
}

// list returns the steps of this rank's valid checkpoints, ascending, the
// newest keep of them; foreign reports how many files of this rank's name
// another run left (another size or seed), which are not listed.
func (st *ckptStore) list() (steps []int, foreign int, err error) {
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list checkpoints: %w", err)
	}
	prefix := fmt.Sprintf("r%06d-s", st.rank)
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		num, ok = strings.CutSuffix(num, ".ckpt")
		step, err := strconv.Atoi(num)
		if !ok || err != nil || step <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join(st.dir, e.Name()))
		if err != nil {
			continue // dropped meanwhile
		}
		if _, err := st.parse(step, string(b)); err != nil {
			foreign++
			continue
		}
		steps = append(steps, step)
	}
	slices.Sort(steps)
	if len(steps) > st.keep {
		steps = steps[len(steps)-st.keep:]
	}
	return steps, foreign, nil
}

// removeTemps removes the temporary files an earlier incarnation of this
// rank left when it was killed while writing.
func (st *ckptStore) removeTemps() {
	ents, _ := os.ReadDir(st.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), st.tempPrefix()) && strings.HasSuffix(e.Name(), ".tmp") {
			os.Remove(filepath.Join(st.dir, e.Name()))
		}
	}
}

// removeAll removes this rank's checkpoints, and the directory when it is
// the last to do so.
func (st *ckptStore) removeAll() {
	ents, _ := os.ReadDir(st.dir)
	prefix := fmt.Sprintf("r%06d-", st.rank)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) || strings.HasPrefix(e.Name(), "."+prefix) {
			os.Remove(filepath.Join(st.dir, e.Name()))
		}
	}
	os.Remove(st.dir) // fails while another rank's files are there
}

// The rollback agreement: after a recovery every rank contributes its
// incarnation, the last ring round it took part in and the steps of its
// checkpoints; every rank then rolls back to the largest step at which
// every rank has one (0, the start, at worst) and joins the ring's next
// round.

type ringAgreement struct {
	inc, round uint64
	steps      []int
}

func (a ringAgreement) encode() []byte {
	b := fmt.Appendf(nil, "%d %d ", a.inc, a.round)
	for i, s := range a.steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(s), 10)
	}
	return b
}

func decodeRingAgreement(p []byte) (ringAgreement, error) {
	f := strings.Split(string(p), " ")
	if len(f) != 3 {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: want 3 fields", p)
	}
	var a ringAgreement
	var err error
	if a.inc, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: incarnation: %w", p, err)
	}
	if a.round, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return ringAgreement{}, fmt.Errorf("rollback agreement %q: round: %w", p, err)
	}
	if f[2] != "" {
		for _, s := range strings.Split(f[2], ",") {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return ringAgreement{}, fmt.Errorf("rollback agreement %q: step %q", p, s)
			}
			a.steps = append(a.steps, n)
		}
	}
	return a, nil
}

// rollbackStep is the largest step in every list, 0 when there is none.
func rollbackStep(lists [][]int) int {
	if len(lists) == 0 {
		return 0
	}
	best := 0
	for _, s := range lists[0] {
		if s <= best {
			continue
		}
		everywhere := true
		for _, l := range lists[1:] {
			if !slices.Contains(l, s) {
				everywhere = false
				break
			}
		}
		if everywhere {
			best = s
		}
	}
	return best
}

// agree decodes every rank's contribution: the step to roll back to, the
// ring's next round and every rank's incarnation.
func agree(vals [][]byte) (step int, round uint64, incs []uint64, err error) {
	lists := make([][]int, len(vals))
	incs = make([]uint64, len(vals))
	for r, v := range vals {
		a, err := decodeRingAgreement(v)
		if err != nil {
			return 0, 0, nil, fmt.Errorf("rank %d: %w", r, err)
		}
		lists[r], incs[r] = a.steps, a.inc
		round = max(round, a.round)
	}
	return rollbackStep(lists), round + 1, incs, nil
}

// The ring's wire: a connection starts with a hello from the sender (its
// rank, incarnation and the ring round it was made for), then carries
// messages: (step, sender's incarnation, value at that step).

const ringFrame = 24

var ringMagic = [4]byte{'R', 'I', 'N', 'G'}

type ringHello struct {
	rank       uint32
	inc, round uint64
}

func (h ringHello) encode() []byte {
	b := append([]byte(nil), ringMagic[:]...)
	b = binary.BigEndian.AppendUint32(b, h.rank)
	b = binary.BigEndian.AppendUint64(b, h.inc)
	return binary.BigEndian.AppendUint64(b, h.round)
}

func decodeRingHello(b []byte) (ringHello, error) {
	if len(b) != ringFrame || [4]byte(b[:4]) != ringMagic {
		return ringHello{}, errors.New("not a ringapp hello")
	}
	return ringHello{binary.BigEndian.Uint32(b[4:]), binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:])}, nil
}

type ringMsg struct{ step, inc, value uint64 }

func (m ringMsg) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, m.step)
	b = binary.BigEndian.AppendUint64(b, m.inc)
	return binary.BigEndian.AppendUint64(b, m.value)
}

func decodeRingMsg(b []byte) ringMsg {
	return ringMsg{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:])}
}

// helloConn is a connection accepted with its hello read.
type helloConn struct {
	conn  net.Conn
	hello ringHello
}

// ringAcceptor accepts the ring's connections for the listener's life and
// reads their hellos; stop ends it.
type ringAcceptor struct {
	ln    net.Listener
	conns chan helloConn
	quit  chan struct{}
	done  chan struct{}
	err   error // why Accept ended (read after done)
}

func startRingAcceptor(ln net.Listener, helloWait time.Duration) *ringAcceptor {
	a := &ringAcceptor{ln: ln, conns: make(chan helloConn, 16), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				a.err = err
				return
			}
			b := make([]byte, ringFrame)
			conn.SetReadDeadline(time.Now().Add(helloWait))
			_, err = io.ReadFull(conn, b)
			h, herr := decodeRingHello(b)
			if err != nil || herr != nil {
				conn.Close()
				continue
			}
			conn.SetReadDeadline(time.Time{})
			select {
			case a.conns <- helloConn{conn, h}:
			case <-a.quit:
				conn.Close()
				return
			}
		}
	}()
	return a
}

func (a *ringAcceptor) stop() {
	close(a.quit)
	a.ln.Close()
	<-a.done
	for {
		select {
		case hc := <-a.conns:
			hc.conn.Close()
		default:
			return
		}
	}
}

// ringRecv is a message from the left neighbour, or why its connection
// ended.
type ringRecv struct {
	msg ringMsg
	err error
}

// inLink reads the left neighbour's connection; close ends it.
type inLink struct {
	conn net.Conn
	inc  uint64 // the sender's incarnation, from its hello
	msgs chan ringRecv
	quit chan struct{}
	done chan struct{}
}

func startInLink(hc helloConn) *inLink {
	l := &inLink{conn: hc.conn, inc: hc.hello.inc, msgs: make(chan ringRecv, 64), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		b := make([]byte, ringFrame)
		for {
			var r ringRecv
			if _, err := io.ReadFull(l.conn, b); err != nil {
				r.err = err
			} else {
				r.msg = decodeRingMsg(b)
			}
			select {
			case l.msgs <- r:
			case <-l.quit:
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	return l
}

func (l *inLink) close() {
	close(l.quit)
	l.conn.Close()
	<-l.done
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
	a.needRollback = a.inc > 1 // started again: the others went on without this rank
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
			if err := a.waitRecovery(fmt.Sprintf("the final allgather at step %d was interrupted by a recovery", a.step)); err != nil {
				return false, err
			}
			continue
		} else if err != nil {
			return false, fmt.Errorf("rank %d: final allgather: %w", a.rank, err)
		}
		return a.finish(vals)
	}
}

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
