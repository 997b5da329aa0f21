package ringapp

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/internal/testbuf"

	"github.com/ftlaunch/ftlaunch/launch/client"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// ringAsync runs the recurrence as the ring does: every rank steps on its
// own, in a random order, once its left neighbour's value of the step
// before is there. mutate, when not nil, may change a rank's value after a
// step (a fault).
func ringAsync(size, steps int, seed uint64, rng *rand.Rand, mutate func(r, s int, v uint64) uint64) []uint64 {
	vals := make([][]uint64, size) // vals[r][s]
	for r := range vals {
		vals[r] = []uint64{ringStart(seed, r)}
	}
	done := 0
	if steps == 0 {
		done = size
	}
	for done < size {
		r := rng.IntN(size)
		s := len(vals[r])
		left := (r - 1 + size) % size
		if s > steps || len(vals[left]) < s {
			continue
		}
		v := ringMix(r, s, vals[r][s-1], vals[left][s-1])
		if mutate != nil {
			v = mutate(r, s, v)
		}
		vals[r] = append(vals[r], v)
		if s == steps {
			done++
		}
	}
	final := make([]uint64, size)
	for r := range final {
		final[r] = vals[r][steps]
	}
	return final
}

func TestRingRecurrence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct{ size, steps int }{{1, 0}, {1, 7}, {2, 10}, {3, 1}, {8, 100}, {13, 57}} {
		want := ringExpected(tc.size, tc.steps, 42)
		if got := ringChecksum(ringAsync(tc.size, tc.steps, 42, rng, nil)); got != want {
			t.Errorf("size %d steps %d: ring order gives %016x, simulation %016x", tc.size, tc.steps, got, want)
		}
	}
	base := ringExpected(8, 100, 42)
	for name, other := range map[string]uint64{
		"another seed":   ringExpected(8, 100, 43),
		"another size":   ringExpected(9, 100, 42),
		"one step fewer": ringExpected(8, 99, 42),
		"one step more":  ringExpected(8, 101, 42),
		"a step applied twice": ringChecksum(ringAsync(8, 100, 42, rng, func(r, s int, v uint64) uint64 {
			if r == 3 && s == 50 {
				return ringMix(r, s, v, v)
			}
			return v
		})),
		"a neighbour's value lost": ringChecksum(ringAsync(8, 100, 42, rng, func(r, s int, v uint64) uint64 {
			if r == 5 && s == 10 {
				return ringMix(r, s, v, 0)
			}
			return v
		})),
	} {
		if other == base {
			t.Errorf("%s: the checksum did not change", name)
		}
	}
}

func TestRingRollbackStep(t *testing.T) {
	for _, tc := range []struct {
		lists [][]int
		want  int
	}{
		{nil, 0},
		{[][]int{nil}, 0},
		{[][]int{{5, 10, 15}}, 15},
		{[][]int{{5, 10, 15}, {5, 10}, {5, 10, 15, 20}}, 10},
		{[][]int{{5, 10, 15}, {}, {5}}, 0},
		{[][]int{{5, 15}, {5, 10, 15}, {10, 15}}, 15},
		{[][]int{{5, 10, 20}, {5, 15, 20}, {10, 20}}, 20},
		{[][]int{{5, 10}, {15, 20}}, 0},
		{[][]int{{20, 5, 10}, {10, 5}}, 10}, // order does not matter
	} {
		if got := rollbackStep(tc.lists); got != tc.want {
			t.Errorf("rollbackStep(%v) = %d, want %d", tc.lists, got, tc.want)
		}
	}
}

func TestRingAgreement(t *testing.T) {
	vals := [][]byte{
		ringAgreement{inc: 1, round: 2, steps: []int{5, 10, 15}}.encode(),
		ringAgreement{inc: 3, round: 0, steps: []int{10}}.encode(), // started again: round 0
		ringAgreement{inc: 1, round: 2, steps: []int{5, 10}}.encode(),
	}
	step, round, incs, err := agree(vals)
	if err != nil || step != 10 || round != 3 || !slices.Equal(incs, []uint64{1, 3, 1}) {
		t.Fatalf("agree = step %d round %d incs %v, %v; want 10 3 [1 3 1]", step, round, incs, err)
	}
	if a, err := decodeRingAgreement(ringAgreement{inc: 2, round: 7}.encode()); err != nil || a.inc != 2 || a.round != 7 || a.steps != nil {
		t.Fatalf("no checkpoints: %+v, %v", a, err)
	}
	for _, bad := range []string{"", "1 2", "x 2 5", "1 y 5", "1 2 5,,10", "1 2 -5", "1 2 0", "1 2 5 6"} {
		if _, _, _, err := agree([][]byte{[]byte(bad)}); err == nil {
			t.Errorf("agreement %q accepted", bad)
		}
	}
}

func TestRingCheckpoints(t *testing.T) {
	dir := t.TempDir()
	st := newCkptStore(dir, 3, 4, 5, 42)
	st.keep = 4
	if v, err := st.load(0); err != nil || v != ringStart(42, 3) {
		t.Fatalf("step 0: %x, %v", v, err)
	}
	for s := 5; s <= 40; s += 5 {
		if err := st.write(s, uint64(s)*1000); err != nil {
			t.Fatal(err)
		}
	}
	// Another rank's, another run's and a torn write of this rank's.
	other := newCkptStore(dir, 2, 4, 5, 42)
	if err := other.write(45, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.name(50), []byte(strings.Replace(st.content(50, 7), "seed 42", "seed 41", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, st.tempPrefix()+"123.tmp")
	if err := os.WriteFile(temp, []byte("ringapp size"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps, foreign, err := st.list()
	if err != nil || foreign != 1 || !slices.Equal(steps, []int{25, 30, 35, 40}) {
		t.Fatalf("list = %v (%d foreign), %v; want [25 30 35 40], 1 foreign", steps, foreign, err)
	}
	if _, err := os.Stat(st.name(20)); !os.IsNotExist(err) {
		t.Errorf("the checkpoint at step 20 was kept (keep 4): %v", err)
	}
	if v, err := st.load(35); err != nil || v != 35000 {
		t.Fatalf("load(35) = %d, %v", v, err)
	}
	if _, err := st.load(50); err == nil {
		t.Error("a checkpoint of another seed loaded")
	}
	if _, err := st.load(20); err == nil {
		t.Error("a dropped checkpoint loaded")
	}
	st.removeTemps()
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Errorf("a temporary file was left: %v", err)
	}
	st.removeAll()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("after removeAll of rank 3: %d files left, want rank 2's", len(ents))
	}
	other.removeAll()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the last rank did not remove the directory: %v", err)
	}
}

// The recurrence resumes from any common checkpoint: ranks at different
// steps (as far apart as the ring lets them be) roll back to the last
// step every rank saved, and the result is the one expected.
func TestRingRollbackResumes(t *testing.T) {
	const size, steps, every = 6, 60, 5
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		// Run the ring in a random order up to a random point.
		vals := make([][]uint64, size)
		for r := range vals {
			vals[r] = []uint64{ringStart(7, r)}
		}
		for range rng.IntN(size * steps) {
			r := rng.IntN(size)
			s, left := len(vals[r]), (r-1+size)%size
			if s <= steps && len(vals[left]) >= s {
				vals[r] = append(vals[r], ringMix(r, s, vals[r][s-1], vals[left][s-1]))
			}
		}
		lists := make([][]int, size)
		for r := range vals {
			for s := every; s < len(vals[r]); s += every {
				lists[r] = append(lists[r], s)
			}
		}
		back := rollbackStep(lists)
		for r := range vals {
			if len(vals[r]) <= back {
				t.Fatalf("trial %d: rank %d at step %d cannot roll back to %d", trial, r, len(vals[r])-1, back)
			}
		}
		cur := make([]uint64, size)
		for r := range cur {
			cur[r] = vals[r][back]
		}
		for s := back + 1; s <= steps; s++ {
			next := make([]uint64, size)
			for r := range next {
				next[r] = ringMix(r, s, cur[r], cur[(r-1+size)%size])
			}
			cur = next
		}
		if got, want := ringChecksum(cur), ringExpected(size, steps, 7); got != want {
			t.Fatalf("trial %d: resumed from step %d: %016x, want %016x", trial, back, got, want)
		}
	}
}

// A fake agent: it speaks the rank protocol to ranks that run in this
// process (ringAppRun over a socket pair) and carries out the restart
// protocol's rank side as the contract describes it: Suspend to the
// survivors, the rank started again as the next incarnation, its Publish
// held, a Patch with its new address, Resume, then its Publish answered
// with the patched table. A rank is "killed" by closing its connection:
// its ringAppRun fails at once and closes its sockets, as a killed
// process's would be; it is started again once it ended.

type fakeFrame struct {
	rank int
	inc  uint64
	f    wire.Frame
	err  error
}

type fakeRankResult struct {
	rank int
	inc  uint64
	ok   bool
	err  error
}

type fakeRank struct {
	inc     uint64
	conn    net.Conn // the agent's end
	pending *wire.Frame
	ended   bool // this incarnation reported its end
	stdout  *syncBuffer
	stderr  *syncBuffer
}

// fakeOpts says when the fake agent kills a rank.
type fakeOpts struct {
	killAt       func() (int, bool) // asked every few milliseconds, until a kill
	killInFinal  int                // >= 0: this rank, once every rank waits in the first allgather
	suspendAfter time.Duration      // between the kill and the Suspend; < 0: no recovery at all
	tick         func(a *fakeAgent) // called every few milliseconds in the agent's loop (nil: not)
}

type fakeAgent struct {
	t       *testing.T
	cfg     ringConfig
	opts    fakeOpts
	ranks   []*fakeRank
	frames  chan fakeFrame
	results chan fakeRankResult
	quit    chan struct{} // closed when the test ends: the readers stop
	epoch   uint64
	version uint64
	table   [][]byte
	ops     [][]uint8 // every rank's collectives, in order (all incarnations)
	killed  bool

	// The recovery under way.
	victim     int    // -1: none
	phase      string // "dying": Suspend not sent yet; "suspend": acks and the victim's end awaited; "respawn": its Publish; "patch": acks
	acks       []bool // by rank, in the current phase
	victimDone bool
	suspendAt  <-chan time.Time
}

func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "fake-agent")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// start runs incarnation inc of rank r.
func (a *fakeAgent) start(r int, inc uint64) {
	mine, theirs := socketPair(a.t)
	fr := &fakeRank{inc: inc, conn: mine, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	a.ranks[r] = fr
	go func() { // ends with the connection
		rd := wire.NewReader(mine, rankproto.MaxFrame)
		for {
			f, err := rd.Next()
			select {
			case a.frames <- fakeFrame{rank: r, inc: inc, f: f, err: err}:
			case <-a.quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // the rank: ends when ringAppRun does
		c, err := client.New(theirs)
		if err != nil {
			a.results <- fakeRankResult{r, inc, false, err}
			return
		}
		ok, err := ringAppRun(c, a.cfg, fr.stdout, fr.stderr)
		c.Close()
		a.results <- fakeRankResult{r, inc, ok, err}
	}()
}

func (a *fakeAgent) send(r int, typ uint8, payload []byte) {
	// A rank that ended has its end closed: the write fails, harmlessly.
	_ = wire.WriteFrame(a.ranks[r].conn, typ, payload)
}

func (a *fakeAgent) event(r int, typ uint8, rows []rankproto.Row) {
	a.send(r, typ, rankproto.EncodeEvent(rankproto.Event{Type: typ, Epoch: a.epoch, Version: a.version, Rows: rows}))
}

func (a *fakeAgent) survivors() []int {
	var s []int
	for r := range a.ranks {
		if r != a.victim {
			s = append(s, r)
		}
	}
	return s
}

func (a *fakeAgent) allAcked() bool {
	for _, r := range a.survivors() {
		if !a.acks[r] {
			return false
		}
	}
	return true
}

// kill ends the victim's connection, and starts the recovery at once or
// after opts.suspendAfter.
func (a *fakeAgent) kill(victim int) {
	a.killed = true
	a.victim, a.phase, a.victimDone = victim, "dying", false
	a.ranks[victim].conn.Close()
	a.ranks[victim].pending = nil
	switch {
	case a.opts.suspendAfter == 0:
		a.suspend()
	case a.opts.suspendAfter > 0:
		a.suspendAt = time.After(a.opts.suspendAfter)
	}
}

// suspend suspends the survivors; their collectives in flight are
// answered Recovering first.
func (a *fakeAgent) suspend() {
	a.phase, a.suspendAt = "suspend", nil
	a.acks = make([]bool, len(a.ranks))
	a.epoch++
	for _, r := range a.survivors() {
		if a.ranks[r].pending != nil {
			a.ranks[r].pending = nil
			a.send(r, rankproto.TRecovering, new(wire.Encoder).Uint(a.epoch).Data())
		}
		a.event(r, rankproto.TSuspend, nil)
	}
	a.advance()
}

// advance moves the recovery on once its phase's conditions hold.
func (a *fakeAgent) advance() {
	switch {
	case a.phase == "suspend" && a.victimDone && a.allAcked():
		a.phase = "respawn"
		a.start(a.victim, a.ranks[a.victim].inc+1)
	case a.phase == "patch" && a.allAcked():
		for _, r := range a.survivors() {
			a.event(r, rankproto.TResume, nil)
		}
		a.send(a.victim, rankproto.TValues, rankproto.EncodeValues(a.table))
		a.victim, a.phase = -1, ""
	}
}

func (a *fakeAgent) serve(ff fakeFrame) {
	t := a.t
	fr := a.ranks[ff.rank]
	if ff.inc != fr.inc || ff.err != nil {
		return // an incarnation that was replaced, or a connection that ended
	}
	f := ff.f
	switch f.Type {
	case rankproto.TInit:
		info := rankproto.Info{Rank: ff.rank, Size: len(a.ranks), LocalSize: 1, Node: "fake", JobID: "fakejob", Incarnation: fr.inc}
		a.send(ff.rank, rankproto.TInitOK, info.Encode())
		return
	case rankproto.TAck:
		typ, epoch, err := rankproto.DecodeAck(f.Payload)
		if err != nil || epoch != a.epoch {
			t.Errorf("rank %d: ack %d of epoch %d (now %d): %v", ff.rank, typ, epoch, a.epoch, err)
		}
		want := map[string]uint8{"suspend": rankproto.TSuspend, "patch": rankproto.TPatch}[a.phase]
		if typ != want {
			t.Errorf("rank %d: ack of %d in phase %q", ff.rank, typ, a.phase)
		}
		a.acks[ff.rank] = true
		a.advance()
		return
	case rankproto.TPublish, rankproto.TAllgather:
	default:
		t.Errorf("rank %d: request of type %d", ff.rank, f.Type)
		return
	}
	a.ops[ff.rank] = append(a.ops[ff.rank], f.Type)
	if a.phase == "respawn" && ff.rank == a.victim {
		if f.Type != rankproto.TPublish {
			t.Errorf("the new rank %d's first collective is %d, want publish", ff.rank, f.Type)
		}
		vs, err := rankproto.DecodeValues(f.Payload)
		if err != nil || len(vs) != 1 {
			t.Fatalf("publish of the new rank: %v", err)
		}
		a.table[ff.rank] = vs[0]
		a.version++
		a.phase = "patch"
		a.acks = make([]bool, len(a.ranks))
		row := []rankproto.Row{{Rank: ff.rank, Incarnation: fr.inc, ITuple: vs[0]}}
		for _, r := range a.survivors() {
			a.event(r, rankproto.TPatch, row)
		}
		a.advance()
		return
	}
	if a.phase != "" && a.phase != "dying" {
		a.send(ff.rank, rankproto.TRecovering, new(wire.Encoder).Uint(a.epoch).Data())
		return
	}
	fr.pending = &f
	for r, o := range a.ranks {
		if o.pending == nil || r == a.victim {
			return // a dead rank's collective never completes
		}
	}
	if f.Type == rankproto.TAllgather && a.opts.killInFinal >= 0 && !a.killed {
		a.kill(a.opts.killInFinal)
		return
	}
	var vals [][]byte
	for r, o := range a.ranks {
		if o.pending.Type != f.Type {
			t.Errorf("collectives do not line up: rank %d calls %d, rank %d %d", r, o.pending.Type, ff.rank, f.Type)
		}
		vs, err := rankproto.DecodeValues(o.pending.Payload)
		if err != nil || len(vs) != 1 {
			t.Fatalf("rank %d: values: %v", r, err)
		}
		vals = append(vals, vs[0])
	}
	if f.Type == rankproto.TPublish {
		a.table = vals
	}
	for r, o := range a.ranks {
		o.pending = nil
		a.send(r, rankproto.TValues, rankproto.EncodeValues(vals))
	}
}

// fakeJob is how a job under the fake agent went.
type fakeJob struct {
	stdout string    // rank 0's
	stderr string    // every rank's, every incarnation's
	ops    [][]uint8 // every rank's collectives (all incarnations)
	errs   []error   // every rank's last incarnation's error (or failed check)
}

// runFakeJob runs size ranks under the fake agent until every rank's
// last incarnation ended.
func runFakeJob(t *testing.T, size int, cfg ringConfig, opts fakeOpts) fakeJob {
	a := &fakeAgent{t: t, cfg: cfg, opts: opts, ranks: make([]*fakeRank, size), frames: make(chan fakeFrame, 64),
		results: make(chan fakeRankResult, 2*size), victim: -1, ops: make([][]uint8, size), quit: make(chan struct{})}
	var stderr strings.Builder
	job := fakeJob{errs: make([]error, size)}
	for r := range size {
		a.start(r, 1)
	}
	running := func() int {
		n := 0
		for r, fr := range a.ranks {
			if !fr.ended || r == a.victim && opts.suspendAfter >= 0 {
				n++ // the victim is started again
			}
		}
		return n
	}
	t.Cleanup(func() { // after a failure: end every rank and wait for it
		for _, fr := range a.ranks {
			fr.conn.Close()
		}
		close(a.quit)
		for _, fr := range a.ranks {
			for !fr.ended {
				res := <-a.results
				a.ranks[res.rank].ended = a.ranks[res.rank].ended || res.inc == a.ranks[res.rank].inc
			}
		}
	})
	poll := time.NewTicker(5 * time.Millisecond) // polls killAt's condition
	defer poll.Stop()
	deadline := time.After(60 * time.Second)
	for running() > 0 {
		select {
		case ff := <-a.frames:
			a.serve(ff)
		case res := <-a.results:
			fr := a.ranks[res.rank]
			stderr.WriteString(fr.stderr.String())
			if res.inc != fr.inc {
				t.Fatalf("rank %d incarnation %d reported after it was replaced", res.rank, res.inc)
			}
			fr.ended = true
			if res.rank == a.victim && (a.phase == "dying" || a.phase == "suspend") {
				if res.err == nil {
					t.Fatalf("the killed rank %d ended without error", res.rank)
				}
				a.victimDone = true
				a.advance()
				continue
			}
			job.errs[res.rank] = res.err
			if res.err == nil && !res.ok {
				job.errs[res.rank] = errors.New("the checksum is not the expected one")
			}
		case <-a.suspendAt:
			a.suspend()
		case <-poll.C:
			if opts.tick != nil {
				opts.tick(a)
			}
			if opts.killAt == nil || a.killed {
				continue
			}
			if r, ok := opts.killAt(); ok {
				a.kill(r)
			}
		case <-deadline:
			t.Fatalf("the job did not end; stderr so far:\n%s", stderr.String())
		}
	}
	if (opts.killAt != nil || opts.killInFinal >= 0) && !a.killed {
		t.Fatalf("the job ended before the kill; stderr:\n%s", stderr.String())
	}
	job.stdout, job.stderr, job.ops = a.ranks[0].stdout.String(), stderr.String(), a.ops
	return job
}

func TestRingAppRecoveryFakeAgent(t *testing.T) {
	const size = 4
	t.Run("no failure", func(t *testing.T) {
		cfg := ringConfig{steps: 60, stepTime: time.Millisecond, every: 5, dir: t.TempDir(), seed: 5, wait: 20 * time.Second}
		job := runFakeJob(t, size, cfg, fakeOpts{killInFinal: -1})
		e := ringExpected(size, 60, 5)
		if want := fmt.Sprintf("checksum %016x expected %016x\n", e, e); job.stdout != want || job.stderr != "" || errors.Join(job.errs...) != nil {
			t.Fatalf("stdout %q, want %q; errors %v\nstderr:\n%s", job.stdout, want, job.errs, job.stderr)
		}
		for r, o := range job.ops {
			if string(o) != string([]uint8{rankproto.TPublish, rankproto.TAllgather}) {
				t.Errorf("rank %d's collectives: %v", r, o)
			}
		}
	})
	for _, tc := range []struct {
		name          string
		victim, steps int
		inFinal       bool          // killed in the final allgather, not at step 20
		suspendAfter  time.Duration // between the kill and the Suspend
		back          int           // the step the ranks roll back to (-1: any)
		log           string        // a line of the survivors' stderr
	}{
		{"rank 2 at step 20", 2, 60, false, 0, -1, ""},
		{"rank 0 at step 20", 0, 60, false, 0, -1, ""},
		// Either "suspended in the final allgather at step 62" (the
		// Suspend came first) or "the final allgather was interrupted by
		// a recovery at step 62" (the collective's error came first).
		{"rank 3 in the final allgather", 3, 62, true, 0, 60, "at step 62; recovery epoch 1"},
		{"rank 1 in the final allgather after a checkpoint", 1, 60, true, 0, 60, ""},
		// The neighbours see the connection end before any Suspend.
		{"rank 2 at step 20 suspended late", 2, 60, false, 300 * time.Millisecond, -1, "ringapp rank 3: lost the left neighbour, rank 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := ringConfig{steps: tc.steps, stepTime: 2 * time.Millisecond, every: 5, dir: dir, seed: 5, wait: 20 * time.Second}
			mark := newCkptStore(dir, tc.victim, size, 5, 5).name(20)
			opts := fakeOpts{killInFinal: -1, suspendAfter: tc.suspendAfter, killAt: func() (int, bool) {
				_, err := os.Stat(mark)
				return tc.victim, err == nil
			}}
			if tc.inFinal {
				opts.killAt, opts.killInFinal = nil, tc.victim
			}
			job := runFakeJob(t, size, cfg, opts)
			t.Logf("stderr:\n%s", job.stderr)
			e := ringExpected(size, tc.steps, 5)
			if want := fmt.Sprintf("checksum %016x expected %016x\n", e, e); job.stdout != want || errors.Join(job.errs...) != nil {
				t.Fatalf("stdout %q, want %q; errors %v", job.stdout, want, job.errs)
			}
			if n, lines := strings.Count(job.stderr, "rolls back from step"), strings.Count(job.stderr, "\n"); n != size || lines != size {
				t.Errorf("%d rollbacks logged in %d lines, want one line for each of %d ranks", n, lines, size)
			}
			if n := strings.Count(job.stderr, fmt.Sprintf("to step %d ", tc.back)); tc.back >= 0 && n != size {
				t.Errorf("%d ranks rolled back to step %d, want %d", n, tc.back, size)
			}
			if !strings.Contains(job.stderr, fmt.Sprintf("ringapp rank %d: incarnation 2 started;", tc.victim)) {
				t.Errorf("the new rank did not say it started again")
			}
			if !strings.Contains(job.stderr, tc.log) {
				t.Errorf("stderr does not say %q", tc.log)
			}
			for r, o := range job.ops {
				// One Publish (two for the rank started again), the
				// rollback agreement after the recovery, the final
				// allgather (and collectives the recovery interrupted).
				publishes, n := 1, len(o)
				if r == tc.victim {
					publishes = 2
				}
				p := 0
				for _, op := range o {
					if op == rankproto.TPublish {
						p++
					}
				}
				if n < 3 || o[0] != rankproto.TPublish || p != publishes || o[n-2] != rankproto.TAllgather || o[n-1] != rankproto.TAllgather {
					t.Errorf("rank %d's collectives: %v", r, o)
				}
			}
		})
	}
	// A peer lost and no recovery: the survivors give up after
	// --recovery-wait, saying why.
	t.Run("no recovery", func(t *testing.T) {
		dir := t.TempDir()
		cfg := ringConfig{steps: 60, stepTime: 2 * time.Millisecond, every: 5, dir: dir, seed: 5, wait: 300 * time.Millisecond}
		mark := newCkptStore(dir, 1, size, 5, 5).name(10)
		job := runFakeJob(t, size, cfg, fakeOpts{killInFinal: -1, suspendAfter: -1, killAt: func() (int, bool) {
			_, err := os.Stat(mark)
			return 1, err == nil
		}})
		t.Logf("stderr:\n%s", job.stderr)
		if job.stdout != "" {
			t.Errorf("stdout %q", job.stdout)
		}
		if err := job.errs[2]; err == nil || !strings.Contains(err.Error(), "rank 2: lost the left neighbour, rank 1") || !strings.Contains(err.Error(), "no recovery began within 300ms") {
			t.Errorf("rank 2 (right of the lost rank): %v", err)
		}
		for _, r := range []int{0, 3} {
			if job.errs[r] == nil {
				t.Errorf("rank %d succeeded", r)
			}
		}
	})
}

func TestRingAppFlags(t *testing.T) {
	for _, args := range [][]string{{"--steps", "-1"}, {"--checkpoint-every", "0"}, {"--step-time", "-1s"}, {"--recovery-wait", "0s"}, {"extra"}, {"--nope"}} {
		if code, _, stderr := runMain(t, args...); code != 2 || !strings.Contains(stderr, "ftlaunch ringapp:") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
	if code, stdout, _ := runMain(t, "--help"); code != 0 || !strings.Contains(stdout, "--checkpoint-every K") {
		t.Errorf("--help: exit %d, %q", code, stdout)
	}
	t.Setenv("FTLAUNCH_FD", "")
	if code, _, stderr := runMain(t); code != 1 || !strings.Contains(stderr, "not started by ftlaunch") {
		t.Errorf("outside ftlaunch: exit %d, stderr %q", code, stderr)
	}
}

// runMain runs Main with args, returning its exit status and output.
func runMain(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// syncBuffer is a buffer that a rank's goroutines write while the test
// reads it.
type syncBuffer = testbuf.Buffer

// TestRingAppFinishFile: with --finish-file every rank, done with its
// steps, waits for the file before the final allgather. A rank killed
// while they wait is recovered (the survivors' cause says they were
// waiting for the file); the file, made once the recovery is over, lets
// the job end with the right result, each rank going through its
// Publish, the rollback's allgather and the final one only.
func TestRingAppFinishFile(t *testing.T) {
	const size, steps, victim = 4, 30, 1
	dir := t.TempDir()
	finish := filepath.Join(t.TempDir(), "finish")
	cfg := ringConfig{steps: steps, stepTime: time.Millisecond, every: 5, dir: dir, seed: 3, wait: 20 * time.Second, finish: finish}
	atEnd := func() bool {
		for r := range size {
			if _, err := os.Stat(newCkptStore(dir, r, size, 5, 3).name(steps)); err != nil {
				return false
			}
		}
		return true
	}
	job := runFakeJob(t, size, cfg, fakeOpts{killInFinal: -1,
		killAt: func() (int, bool) { return victim, atEnd() },
		tick: func(a *fakeAgent) {
			// The recovery is over once the rollback's allgather was
			// made by every rank (the new one too).
			done := a.killed && a.victim < 0
			for _, o := range a.ops {
				done = done && slices.Contains(o, rankproto.TAllgather)
			}
			if done {
				if err := os.WriteFile(finish, nil, 0o644); err != nil {
					t.Error(err)
				}
			}
		}})
	e := ringExpected(size, steps, 3)
	if want := fmt.Sprintf("checksum %016x expected %016x\n", e, e); job.stdout != want || errors.Join(job.errs...) != nil {
		t.Fatalf("stdout %q, want %q; errors %v\nstderr:\n%s", job.stdout, want, job.errs, job.stderr)
	}
	if n := strings.Count(job.stderr, "suspended in the wait for --finish-file at step 30"); n != size-1 {
		t.Errorf("%d survivors say the recovery came while they waited for the file, want %d:\n%s", n, size-1, job.stderr)
	}
	for r, o := range job.ops {
		want := []uint8{rankproto.TPublish, rankproto.TAllgather, rankproto.TAllgather}
		if r == victim {
			want = []uint8{rankproto.TPublish, rankproto.TPublish, rankproto.TAllgather, rankproto.TAllgather}
		}
		if !slices.Equal(o, want) {
			t.Errorf("rank %d's collectives: %v, want %v", r, o, want)
		}
	}
}
