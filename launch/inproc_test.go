package launch

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/agent"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/root"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The in-process harness: the root (Run's event loop) and this machine's
// agent run in the test's own process, linked over a socketpair, so their
// loops are tested without the ftlaunch binary. Ranks are real processes.
// The oracle is the job's state log, read back as `ftlaunch inspect` does
// and checked with raftstore's invariants.

// inprocJob is one job run in process.
type inprocJob struct {
	res      root.Result
	err      error
	stdout   bytes.Buffer
	stderr   bytes.Buffer
	agentLog bytes.Buffer
	state    *raftstore.State
	kill     func() // ends the agent at once (set while the job runs)
}

// runInProcess runs a job whose agent is a goroutine of this process.
// ready, if set, is called with the job once its agent started.
func runInProcess(t *testing.T, opts root.Options, ready func(*inprocJob)) *inprocJob {
	t.Helper()
	j := &inprocJob{}
	var logMu sync.Mutex
	opts.StateDir = t.TempDir()
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	opts.Stdout, opts.Stderr = &j.stdout, &j.stderr
	start := func(conn net.Conn) *launcher.LocalAgent {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			err = agent.Run(ctx, conn, writerFunc(func(p []byte) (int, error) {
				logMu.Lock()
				defer logMu.Unlock()
				return j.agentLog.Write(p)
			}))
		}()
		j.kill = func() { cancel(); conn.Close() }
		if ready != nil {
			ready(j)
		}
		return &launcher.LocalAgent{Kill: j.kill, Wait: func() error { <-done; return err }}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	j.res, j.err = root.Run(ctx, opts, root.LocalHooks{Start: start})
	j.state = readState(t, opts.StateDir)
	return j
}

// readState reads the job's state log in stateDir, as `ftlaunch inspect`
// does, and checks raftstore's invariants over it. A replicated job has a
// copy per replica (by node): each is checked, and the one that went
// furthest is returned (the last root's: a successor's term is later;
// then its final status, then its table version).
func readState(t *testing.T, stateDir string) *raftstore.State {
	t.Helper()
	dbs, _ := filepath.Glob(filepath.Join(stateDir, "ft-*", "*", "raft.db"))
	if len(dbs) == 0 {
		t.Fatalf("no state log in %s", stateDir)
	}
	var best *raftstore.State
	for _, db := range dbs {
		in, err := raftstore.OpenReadOnly(filepath.Dir(db))
		if err != nil {
			t.Fatalf("read the state log %s: %v", db, err)
		}
		if err := in.State.CheckInvariants(); err != nil {
			t.Fatalf("state log %s: %v", db, err)
		}
		if st := in.State; best == nil || st.LeaderTerm > best.LeaderTerm ||
			st.LeaderTerm == best.LeaderTerm && (st.Status.Done && !best.Status.Done ||
				st.Status.Done == best.Status.Done && st.Version > best.Version) {
			best = st
		}
	}
	return best
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// noRankLeft checks that no process of the job's ranks is still there.
func noRankLeft(t *testing.T, st *raftstore.State) {
	t.Helper()
	for _, r := range st.Ranks {
		if r.PID <= 0 {
			continue
		}
		if err := syscall.Kill(r.PID, 0); !errors.Is(err, syscall.ESRCH) {
			// A zombie is gone for our purpose only once reaped: the agent
			// reaps its ranks before it reports them.
			t.Errorf("rank %d (pid %d) is still there: %v", r.Rank, r.PID, err)
		}
	}
}

func TestInProcessJob(t *testing.T) {
	j := runInProcess(t, root.Options{N: 3, Argv: []string{"/bin/sh", "-c", "echo out $FTLAUNCH_RANK; echo err $FTLAUNCH_RANK >&2"}, Label: true}, nil)
	if j.err != nil || j.res.ExitCode != 0 {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	for _, want := range []string{"[0] out 0\n", "[1] out 1\n", "[2] out 2\n"} {
		if !strings.Contains(j.stdout.String(), want) {
			t.Errorf("stdout lacks %q: %q", want, j.stdout.String())
		}
	}
	if !strings.Contains(j.stderr.String(), "[2] err 2\n") {
		t.Errorf("stderr: %q", j.stderr.String())
	}
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 0 || len(st.Ranks) != 3 {
		t.Fatalf("status %+v, %d ranks", st.Status, len(st.Ranks))
	}
	for _, r := range st.Ranks {
		if r.State != raftstore.RankExited || r.ExitCode != 0 {
			t.Errorf("rank %+v", r)
		}
	}
	noRankLeft(t, st)
}

func TestInProcessRankFails(t *testing.T) {
	j := runInProcess(t, root.Options{N: 3, Argv: []string{"/bin/sh", "-c", `[ "$FTLAUNCH_RANK" = 1 ] && exit 3; exec sleep 30`}}, nil)
	if j.err != nil || j.res.ExitCode != 3 {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "rank 1 on node") || !strings.Contains(j.stderr.String(), "exited with code 3") {
		t.Fatalf("stderr: %q", j.stderr.String())
	}
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 3 || !strings.Contains(st.Status.Message, "rank 1") {
		t.Fatalf("status %+v", st.Status)
	}
	failures := 0
	for _, e := range st.Events {
		if e.Kind == raftstore.EventFailure {
			failures++
		}
	}
	if failures != 1 {
		t.Fatalf("%d failures in the event log", failures)
	}
	noRankLeft(t, st)
}

func TestInProcessAgentLost(t *testing.T) {
	// A rank that runs writes to a FIFO; the test's reader wakes then and
	// ends the agent.
	gate := filepath.Join(t.TempDir(), "running")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // a reader still waiting (no rank ran) is let go
		if f, err := os.OpenFile(gate, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	j := runInProcess(t, root.Options{N: 2, Argv: []string{"/bin/sh", "-c", "echo up > " + gate + "; exec sleep 30"}}, func(j *inprocJob) {
		kill := j.kill
		go func() {
			if f, err := os.Open(gate); err == nil { // returns once a rank opened it
				f.Close()
			}
			kill()
		}()
	})
	if j.err != nil || j.res.ExitCode != root.ExitLauncher {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "lost the agent of node") {
		t.Fatalf("stderr: %q", j.stderr.String())
	}
	if !strings.Contains(j.state.Status.Message, "lost the agent") {
		t.Fatalf("status %+v", j.state.Status)
	}
	noRankLeft(t, j.state)
}

func TestInProcessTimeout(t *testing.T) {
	j := runInProcess(t, root.Options{N: 2, Argv: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond, KillAfter: time.Second}, nil)
	if j.err != nil || j.res.ExitCode != root.ExitTimeout {
		t.Fatalf("exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	if !strings.Contains(j.stderr.String(), "exceeded --timeout") {
		t.Fatalf("stderr: %q", j.stderr.String())
	}
	noRankLeft(t, j.state)
}
