package srunspawn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
)

func TestNewErrors(t *testing.T) {
	_, err := New(Options{Srun: "/nonexistent/srun", Env: []string{"SLURM_JOB_ID=1", "SLURM_JOB_NODELIST=n1"}})
	if !errors.Is(err, ErrSrunNotFound) {
		t.Errorf("missing srun: %v, want ErrSrunNotFound", err)
	}
	_, err = New(Options{Srun: "true", Env: []string{"SLURM_JOB_ID=", "SLURM_JOBID="}})
	if !errors.Is(err, ErrNoAllocation) || !strings.Contains(err.Error(), "SLURM_JOB_ID") {
		t.Errorf("no job: %v, want ErrNoAllocation naming SLURM_JOB_ID", err)
	}
	_, err = New(Options{Srun: "true", Env: []string{"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=", "SLURM_NODELIST="}})
	if !errors.Is(err, ErrNoAllocation) {
		t.Errorf("no node list: %v, want ErrNoAllocation", err)
	}
	_, err = New(Options{Srun: "true", Env: []string{"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[1-"}})
	if err == nil || !strings.Contains(err.Error(), "SLURM_JOB_NODELIST") {
		t.Errorf("bad node list: %v", err)
	}
	s, err := New(Options{Srun: "true", Env: []string{"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[01-03]"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Nodes(); !slices.Equal(got, []string{"n01", "n02", "n03"}) || s.JobID() != "7" {
		t.Errorf("job %s nodes %v", s.JobID(), got)
	}
	ctx := context.Background()
	if _, err := s.Start(ctx, "n04", []string{"true"}, nil); !errors.Is(err, ErrNotAllocated) {
		t.Errorf("Start on n04: %v, want ErrNotAllocated", err)
	}
	if _, err := s.StartGroup(ctx, []string{"n01", "n01"}, []string{"true"}, nil); err == nil {
		t.Error("StartGroup with a host twice: no error")
	}
	if _, err := s.Start(ctx, "n01", nil, nil); err == nil {
		t.Error("Start with an empty command: no error")
	}
}

func TestArgs(t *testing.T) {
	s := &Spawner{opts: Options{ExtraArgs: []string{"--gres=none"}}}
	got := strings.Join(s.Args([]string{"a", "b"}, []string{"agent", "--connect"}), " ")
	want := "-v --overlap --nodes=2 --ntasks=2 --ntasks-per-node=1 --nodelist=a,b --mpi=none --cpu-bind=none --kill-on-bad-exit=0 --wait=0 --no-kill --input=all --gres=none -- agent --connect"
	if got != want {
		t.Errorf("Args:\n got %s\nwant %s", got, want)
	}
}

func TestVerboseFilter(t *testing.T) {
	for line, verbose := range map[string]bool{
		"srun: defined options":                                                                       true,
		"srun: -------------------- --------------------":                                             true,
		"srun: (null)              : node[001-004]":                                                   true,
		"srun: jobid               : 2":                                                               true,
		"srun: jobid 3: nodes(4):`node[001-004]', cpu counts: 1(x4)":                                  true,
		"srun: launch/slurm: _task_start: Node node004, 1 tasks started":                              true,
		"srun: launching StepId=3.0 on host node001, 1 tasks: 0":                                      true,
		"srun: route/default: init: route default plugin loaded":                                      true,
		"srun: error: node002: task 0: Killed":                                                        false,
		"srun: error: Unable to create step for job 1: Requested node configuration is not available": false,
		"srun: Check SLURM_JOB_ID environment variable. Expired or invalid job 9999":                  false,
		"slurmstepd-node001: error: execve(): nosuchcmd: No such file or directory":                   false,
		"hello from the agent":                                                                        false,
	} {
		if got := srunPatterns().verbose.MatchString(line); got != verbose {
			t.Errorf("%q: verbose %v, want %v", line, got, verbose)
		}
	}
}

// TestSpawner runs the spawner against a real Slurm cluster: five nodes,
// an allocation of four.
func TestSpawner(t *testing.T) {
	chaostest.RequireSlurm(t)
	c := chaostest.Slurm(t, 5, slurm.Config{})
	a := allocate(t, c, 4, 8)
	t.Logf("job %s on %s", a.job, a.list)
	if len(a.nodes) != 4 {
		t.Fatalf("allocation %s: want 4 nodes", a.list)
	}
	var outside string
	for _, n := range c.Nodes() {
		if !slices.Contains(a.nodes, n) {
			outside = n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("stdin and EOF", func(t *testing.T) {
		// The task exits on stdin EOF by itself, so that Close's SIGTERM
		// comes (if ever) after it: give it a grace.
		s := a.spawner(t, Options{CloseGrace: 20 * time.Second})
		node := a.nodes[1]
		payload := make([]byte, 100<<10) // beyond a pipe's buffer
		rand.Read(payload)
		// srun passes the tasks' output on by lines: a last partial line
		// would wait for EOF.
		payload[len(payload)-1] = '\n'
		sess, err := s.Start(ctx, node, []string{"sh", "-c", `printf 'node=%s host=%s\n' "$SLURMD_NODENAME" "$(hostname)"; cat; printf '\nEOF-SEEN\n'`}, payload)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		tm := sess.Timings()
		t.Logf("step %s started in %v (queued %v)", sess.(*Session).StepID(), tm.Total, tm.Queued)
		if tm.Attempts != 1 || tm.Total <= 0 {
			t.Errorf("timings %+v", tm)
		}
		if id := sess.(*Session).StepID(); !strings.HasPrefix(id, a.job+".") {
			t.Errorf("step id %q, want %s.N", id, a.job)
		}
		o := collect(sess.Stdout(), sess.Stderr())
		head := []byte(fmt.Sprintf("node=%s host=%s\n", node, node))
		want := append(bytes.Clone(head), payload...)
		waitFor(t, 30*time.Second, "the payload echoed", func() error {
			if got := o.stdout(); !bytes.Equal(got, want) {
				return fmt.Errorf("stdout %d bytes (head %q), want %d; stderr %q", len(got), got[:min(len(got), 40)], len(want), o.stderr())
			}
			return nil
		})
		// stdin is still open: no EOF yet.
		if bytes.Contains(o.stdout(), []byte("EOF-SEEN")) {
			t.Fatal("EOF before Close")
		}
		if err := sess.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sess.Wait(); err != nil {
			t.Fatalf("Wait: %v; stderr %q", err, o.stderr())
		}
		o.done.Wait()
		if got := o.stdout(); !bytes.Equal(got, append(want, "\nEOF-SEEN\n"...)) {
			t.Errorf("stdout after Close ends %q", got[max(0, len(got)-20):])
		}
		if e := o.stderr(); e != "" {
			t.Errorf("stderr %q, want nothing (srun's informational lines go to Logf)", e)
		}
	})

	t.Run("Close ends the step", func(t *testing.T) {
		s := a.spawner(t, Options{})
		node := a.nodes[2]
		// Ignores stdin EOF and SIGTERM: only the step's cancellation
		// (SIGKILL from slurmstepd) ends it.
		sess, err := s.Start(ctx, node, []string{"sh", "-c", `trap '' TERM HUP INT; echo ready; while :; do sleep 1; done`}, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		o := collect(sess.Stdout(), sess.Stderr())
		waitFor(t, 30*time.Second, "the task to run", func() error {
			if !bytes.Contains(o.stdout(), []byte("ready\n")) {
				return fmt.Errorf("stdout %q", o.stdout())
			}
			return nil
		})
		if ps := stepProcs(t, c, node); len(ps) == 0 {
			t.Fatalf("no step process on %s while the step runs", node)
		} else {
			t.Logf("step processes on %s: %v", node, ps)
		}
		closed := time.Now()
		sess.Close()
		err = sess.Wait()
		var xe *ExitError
		if !errors.As(err, &xe) || !xe.Closed {
			t.Fatalf("Wait after Close: %v, want an *ExitError with Closed", err)
		}
		t.Logf("srun ended %v after Close: %v", time.Since(closed).Round(time.Millisecond), err)
		waitFor(t, 20*time.Second, "no step process left on "+node, func() error {
			if ps := stepProcs(t, c, node); len(ps) > 0 {
				return fmt.Errorf("left: %v", ps)
			}
			return nil
		})
		t.Logf("node clean %v after Close", time.Since(closed).Round(time.Millisecond))
		o.done.Wait()
	})

	t.Run("StartGroup", func(t *testing.T) {
		s := a.spawner(t, Options{CloseGrace: 20 * time.Second})
		payload := []byte("group\x00payload\n\xff")
		sess, err := s.StartGroup(ctx, a.nodes, []string{"sh", "-c", `printf '%s:%s:' "$SLURMD_NODENAME" "$SLURM_STEP_NUM_TASKS"; od -An -v -tx1 | tr -d ' \n'; echo`}, payload)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("group step %s started in %v", sess.(*Session).StepID(), sess.Timings().Total)
		o := collect(sess.Stdout(), sess.Stderr())
		sess.Close()
		if err := sess.Wait(); err != nil {
			t.Fatalf("Wait: %v; stderr %q", err, o.stderr())
		}
		o.done.Wait()
		var got []string
		for _, l := range strings.Fields(string(o.stdout())) {
			got = append(got, l)
		}
		slices.Sort(got)
		var want []string
		for _, n := range a.nodes {
			want = append(want, fmt.Sprintf("%s:%d:%s", n, len(a.nodes), hex.EncodeToString(payload)))
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("group output\n got %q\nwant %q", got, want)
		}
	})

	t.Run("host not in the allocation", func(t *testing.T) {
		s := a.spawner(t, Options{})
		_, err := s.Start(ctx, outside, []string{"true"}, nil)
		if !errors.Is(err, ErrNotAllocated) || !strings.Contains(err.Error(), outside) {
			t.Errorf("Start on %s: %v, want ErrNotAllocated naming it", outside, err)
		}
	})

	t.Run("srun fails at once", func(t *testing.T) {
		s := a.spawner(t, Options{Env: []string{"SLURM_JOB_ID=999999"}})
		_, err := s.Start(ctx, a.nodes[0], []string{"true"}, []byte("x"))
		if !errors.Is(err, ErrSrunFailed) || !strings.Contains(err.Error(), "999999") {
			t.Errorf("Start in job 999999: %v, want ErrSrunFailed with srun's message", err)
		}
		t.Logf("error: %v", err)
	})

	t.Run("exit status", func(t *testing.T) {
		s := a.spawner(t, Options{})
		sess, err := s.Start(ctx, a.nodes[3], []string{"sh", "-c", "exit 3"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := collect(sess.Stdout(), sess.Stderr())
		err = sess.Wait()
		var xe *ExitError
		if !errors.As(err, &xe) || xe.Code != 3 || xe.Closed {
			t.Errorf("Wait: %v, want exit status 3", err)
		}
		o.done.Wait()
	})

	t.Run("ctx ends the start", func(t *testing.T) {
		s := a.spawner(t, Options{})
		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if _, err := s.Start(cctx, a.nodes[0], []string{"true"}, nil); !errors.Is(err, context.Canceled) {
			t.Errorf("Start with a cancelled ctx: %v", err)
		}
	})
}

// TestNodeLoss crashes a node under one-agent steps in a --no-kill
// allocation: only the lost node's session ends (once Slurm marks the node
// DOWN, after about SlurmdTimeout); the others run on and end cleanly.
func TestNodeLoss(t *testing.T) {
	chaostest.RequireSlurm(t)
	t.Parallel()
	c := chaostest.Slurm(t, 3, slurm.Config{SlurmdTimeout: 3 * time.Second})
	a := allocate(t, c, 3, 0)
	s := a.spawner(t, Options{CloseGrace: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sess := map[string]*Session{}
	outs := map[string]*output{}
	for _, n := range a.nodes {
		ss, err := s.Start(ctx, n, []string{"sh", "-c", "exec cat >/dev/null"}, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		sess[n] = ss.(*Session)
		outs[n] = collect(ss.Stdout(), ss.Stderr())
		defer ss.Close()
	}
	lost := a.nodes[len(a.nodes)-1]
	killed := time.Now()
	if err := c.Kill(ctx, lost); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- sess[lost].Wait() }()
	select {
	case err := <-ended:
		t.Logf("%s's step ended %v after the crash: %v; stderr %q", lost, time.Since(killed).Round(time.Millisecond), err, outs[lost].stderr())
		var xe *ExitError
		if !errors.As(err, &xe) || !slices.Equal(xe.Lost, []string{lost}) {
			t.Errorf("the lost node's Wait: %v, want an *ExitError with Lost [%s]", err, lost)
		}
	case <-ctx.Done():
		t.Fatalf("the lost node's step did not end: %v", ctx.Err())
	}
	for _, n := range a.nodes[:len(a.nodes)-1] {
		if isDone(sess[n].done) {
			t.Errorf("%s's step ended with %s's: %v; stderr %q", n, lost, sess[n].Wait(), outs[n].stderr())
			continue
		}
		sess[n].Close()
		if err := sess[n].Wait(); err != nil {
			t.Errorf("%s after Close: %v; stderr %q", n, err, outs[n].stderr())
		}
	}
}
