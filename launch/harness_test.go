package launch

// Shared parts of the in-process harness's recovery tests
// (harness_recovery_test.go): the observer of the root's events, the
// rank role that lives through recoveries, the test timing, and the
// checks on the state log.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/agent"
	"github.com/ftlaunch/ftlaunch/launch/client"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/root"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// observer records the events of a job's roots (the front-end's, and a
// successor's on a replica agent of this process) for tests to wait on.
type observer struct {
	mu      sync.Mutex
	evs     []root.Event
	changed chan struct{} // closed (and replaced) at every event
}

func newObserver() *observer { return &observer{changed: make(chan struct{})} }

// observe is root.Options.Observe: it never blocks.
func (o *observer) observe(ev root.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evs = append(o.evs, ev)
	close(o.changed)
	o.changed = make(chan struct{})
}

// resume is a replica agent's way to take over as root, its successor
// observed too.
func (o *observer) resume(ctx context.Context, cfg launcher.ResumeConfig) (agent.Successor, error) {
	s, err := root.Resume(ctx, cfg, o.observe)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// events returns the events so far.
func (o *observer) events() []root.Event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.evs)
}

// untilEnd returns the events before the first RanksEnded (every event
// if none): what a test caused. (After it, agents whose links end before
// they said they were done are declared lost too: docs/design.md.)
func (o *observer) untilEnd() []root.Event {
	evs := o.events()
	if i := slices.IndexFunc(evs, is[root.RanksEnded](nil)); i >= 0 {
		return evs[:i]
	}
	return evs
}

// wait returns the first event that satisfies ok, once there is one, or
// an error when ctx ends first.
func (o *observer) wait(ctx context.Context, ok func(root.Event) bool) (root.Event, error) {
	for {
		o.mu.Lock()
		for _, ev := range o.evs {
			if ok(ev) {
				o.mu.Unlock()
				return ev, nil
			}
		}
		changed := o.changed
		o.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("no such event of the root's: %w (events: %v)", ctx.Err(), o.events())
		}
	}
}

// is returns a predicate true for events of type E that satisfy ok (nil:
// every one).
func is[E root.Event](ok func(E) bool) func(root.Event) bool {
	return func(ev root.Event) bool {
		e, match := ev.(E)
		return match && (ok == nil || ok(e))
	}
}

// count counts the events of type E that satisfy ok (nil: every one).
func count[E root.Event](evs []root.Event, ok func(E) bool) int {
	n := 0
	for _, ev := range evs {
		if is(ok)(ev) {
			n++
		}
	}
	return n
}

// testTiming is the failure detectors' clock for the harness: a silent
// link is declared dead 1.1 s after its last word instead of 5 s, while
// a loaded machine's stall of several hundred milliseconds (2 cores
// shared by several -race test binaries) is still no death. An orphan
// seeks a root for 10 s (not 30): a bound on a failure, which a test
// that passes never waits for (5 s ran out once under make test's load).
func testTiming(opts *Options) {
	opts.Heartbeat = 100 * time.Millisecond
	opts.Timing = proto.Timing{Slack: 700 * time.Millisecond, Confirm: 500 * time.Millisecond, Adopt: 10 * time.Second}
}

// victimEnv names the processes the "recover" role sacrifices:
// "rank:R" (rank R's first incarnation exits with code 7) or "node:NAME"
// (the first incarnations of the ranks on node NAME wait to be killed);
// or "wait:PATH": no victim, every rank waits for the file PATH before
// it allgathers. victimEnv+"2" names a second victim, which may also be
// "late:R" (with "wait:PATH": rank R's first incarnation exits with code
// 7 once PATH exists).
const victimEnv = "FTLAUNCH_TEST_VICTIM"

// recoverRole is a rank of a job under --restart rank that lives through
// recoveries: it acknowledges every Suspend, and allgathers (again after a
// Resume, when a recovery interrupted it) the squares of the ranks; it
// prints the sum. The victims' first incarnations fail (victimEnv), so
// the allgather completes only once they were started again.
func recoverRole(c *client.Client, me string) int {
	resumed := make(chan struct{}, 1)
	events := c.Events()
	go func() { // ends with the connection to the agent
		for ev := range events {
			switch ev.Type {
			case client.Suspend:
				_ = c.Ack(ev)
			case client.Resume:
				select {
				case resumed <- struct{}{}:
				default:
				}
			}
		}
	}()
	// Every incarnation publishes (a rank is replaced only once the node
	// table exists; a rank started again gets it at the recovery's resume).
	if _, err := again(resumed, func() ([][]byte, error) { return c.Publish([]byte(me)) }); err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		return 1
	}
	if c.Incarnation() == 1 {
		for _, v := range []string{os.Getenv(victimEnv), os.Getenv(victimEnv + "2")} {
			switch {
			case v == fmt.Sprintf("rank:%d", c.Rank()):
				return 7
			case v == "node:"+os.Getenv("FTLAUNCH_NODE"):
				select {} // until its agent's end (or a fence) kills it
			case v == fmt.Sprintf("late:%d", c.Rank()):
				waitFile(strings.TrimPrefix(os.Getenv(victimEnv), "wait:"))
				return 7
			}
		}
	}
	if path, ok := strings.CutPrefix(os.Getenv(victimEnv), "wait:"); ok {
		waitFile(path)
	}
	vals, err := again(resumed, func() ([][]byte, error) { return c.Allgather([]byte(fmt.Sprint(c.Rank() * c.Rank()))) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "allgather:", err)
		return 1
	}
	fmt.Printf("%s incarnation %d sum %d\n", me, c.Incarnation(), sumValues(vals))
	return 0
}

// inRingEnv names a directory where a "ringrecover" rank leaves a file
// (its rank) as it enters the ring exchange.
const inRingEnv = "FTLAUNCH_TEST_IN_RING"

// ringRecoverRole is recoverRole around a ring exchange: every
// incarnation publishes; the ranks of the victim node's first incarnation
// wait to be killed; the others enter the ring (saying so in inRingEnv's
// directory), which the victim's loss interrupts and a recovery's Resume
// has them call again, then allgather the squares. Each prints its
// neighbours' values (a rank's value names its incarnation) and the sum.
func ringRecoverRole(c *client.Client, me string) int {
	resumed := make(chan struct{}, 1)
	events := c.Events()
	go func() {
		for ev := range events {
			switch ev.Type {
			case client.Suspend:
				_ = c.Ack(ev)
			case client.Resume:
				select {
				case resumed <- struct{}{}:
				default:
				}
			}
		}
	}()
	if _, err := again(resumed, func() ([][]byte, error) { return c.Publish([]byte(me)) }); err != nil {
		fmt.Fprintln(os.Stderr, "publish:", err)
		return 1
	}
	if c.Incarnation() == 1 && os.Getenv(victimEnv) == "node:"+os.Getenv("FTLAUNCH_NODE") {
		select {} // until its agent's end kills it
	}
	if dir := os.Getenv(inRingEnv); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprint(c.Rank())), nil, 0o600)
	}
	lr, err := again(resumed, func() ([][]byte, error) {
		l, r, err := c.Ring([]byte(fmt.Sprintf("%s.%d", me, c.Incarnation())))
		return [][]byte{l, r}, err
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ring:", err)
		return 1
	}
	vals, err := again(resumed, func() ([][]byte, error) { return c.Allgather([]byte(fmt.Sprint(c.Rank() * c.Rank()))) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "allgather:", err)
		return 1
	}
	fmt.Printf("%s incarnation %d ring %s %s sum %d\n", me, c.Incarnation(), lr[0], lr[1], sumValues(vals))
	return 0
}

// waitFile waits for the test's word: the file path exists (a rank is
// killed with its agent meanwhile).
func waitFile(path string) {
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // polling for the test's file
	}
}

// sumValues adds up an allgather's numbers.
func sumValues(vals [][]byte) int {
	sum := 0
	for _, v := range vals {
		var x int
		fmt.Sscan(string(v), &x)
		sum += x
	}
	return sum
}

// again calls a collective until a recovery does not interrupt it: after
// the recovery's Resume, or a moment later for a rank started again,
// which is not told of the recovery that started it.
func again(resumed <-chan struct{}, call func() ([][]byte, error)) ([][]byte, error) {
	for {
		vals, err := call()
		if !errors.Is(err, client.ErrRecovering) {
			return vals, err
		}
		select {
		case <-resumed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recoverOpts are a job's options under --restart rank with the
// "recover" role.
func recoverOpts(victim string) Options {
	return Options{Env: []string{rankRoleEnv + "=recover", victimEnv + "=" + victim}, Restart: recovery.Rank, MaxRestarts: 3, Label: true}
}

// sumOf is 0²+…+(n-1)².
func sumOf(n int) int { return (n - 1) * n * (2*n - 1) / 6 }

// checkCompleted checks a job that recovered and completed: exit 0,
// every rank printed the sum, the state log says every rank exited 0
// and every recovery it records is over (journal.Analyze), and no rank
// is left.
func checkCompleted(t *testing.T, j *nodesJob, n int) *journal.Report {
	t.Helper()
	if j.err != nil || j.res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stderr %s; agents:\n%s", j.res.ExitCode, j.err, j.stderr.String(), j.sp.log.String())
	}
	for r := range n {
		if want := fmt.Sprintf("sum %d\n", sumOf(n)); !strings.Contains(j.stdout.String(), fmt.Sprintf("[%d] rank%d ", r, r)) || !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks rank %d's %q: %q", r, want, j.stdout.String())
		}
	}
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 0 || len(st.Ranks) != n {
		t.Fatalf("status %+v, %d ranks", st.Status, len(st.Ranks))
	}
	for _, r := range st.Ranks {
		if r.State != raftstore.RankExited || r.ExitCode != 0 {
			t.Errorf("rank %+v", r)
		}
	}
	rep := journal.Analyze(st)
	if len(rep.Invariants) > 0 {
		t.Errorf("invariants: %v", rep.Invariants)
	}
	if len(rep.Recoveries) == 0 {
		t.Errorf("the state log records no recovery")
	}
	for _, rec := range rep.Recoveries {
		if !rec.Over() {
			t.Errorf("recovery of rank %d node %s: %s, phases %+v", rec.Rank, rec.Node, rec.Outcome, rec.Phases)
		}
	}
	noRankLeft(t, st)
	return rep
}
