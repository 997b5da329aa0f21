package fence

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// proc is a `sleep 60` the test started and reaps.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped
	ws   syscall.WaitStatus
}

// start starts `sleep 60` with env as its whole environment, in a process
// group of its own.
func start(t *testing.T, env ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command("sleep", "60"), done: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.ws, _ = p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// killed waits for the process to end and reports whether SIGKILL ended it.
func (p *proc) killed() bool {
	select {
	case <-p.done:
		return p.ws.Signaled() && p.ws.Signal() == syscall.SIGKILL
	case <-time.After(5 * time.Second):
		return false
	}
}

// procState is a process's state letter (/proc/<pid>/stat field 3), 0
// when there is no such process.
func procState(pid int) byte {
	f, err := procStat(pid)
	if err != nil || len(f) == 0 || f[0] == "" {
		return 0
	}
	return f[0][0]
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func TestKillMatchesJobNodeAndIncarnation(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	job := "ft-fencetest" + filepath.Base(t.TempDir())
	target := Target{Job: job, Node: "node1.example", UpTo: 2}
	env := func(job, node, inc string) []string {
		return []string{EnvJob + "=" + job, EnvNode + "=" + node, EnvIncarnation + "=" + inc}
	}
	inc1 := start(t, env(job, "node1.example", "1")...)
	inc2 := start(t, env(job, "node1.example", "2")...)
	inc3 := start(t, env(job, "node1.example", "3")...) // the replacement's rank
	other := start(t, env(job, "node2", "1")...)
	otherJob := start(t, env(job+"x", "node1.example", "1")...)
	unmarked := start(t)
	agent := start(t)    // stands for the agent of incarnation 2
	newAgent := start(t) // the agent of incarnation 3
	if _, err := record(target, agent.pid()); err != nil {
		t.Fatal(err)
	}
	if _, err := record(Target{Job: job, Node: "node1.example", UpTo: 3}, newAgent.pid()); err != nil {
		t.Fatal(err)
	}
	// A stopped agent (SIGSTOP) is killed all the same.
	if err := syscall.Kill(agent.pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	res, err := Kill(target)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Agents) != 1 || res.Agents[0] != agent.pid() || res.Ranks != 2 || len(res.Left) != 0 {
		t.Errorf("fence: %+v (%v), want agent %d and 2 ranks, none left", res, res, agent.pid())
	}
	// Kill returns once what it killed has ended: zombies (or reaped by
	// now), nothing that runs.
	for name, p := range map[string]*proc{"incarnation 1": inc1, "incarnation 2": inc2, "agent": agent} {
		if st := procState(p.pid()); st != 'Z' && st != 'X' && st != 0 {
			t.Errorf("%s: state %c when Kill returned", name, st)
		}
	}
	for name, cmd := range map[string]*proc{"incarnation 1": inc1, "incarnation 2": inc2, "agent": agent} {
		if !cmd.killed() {
			t.Errorf("%s: not killed", name)
		}
	}
	for name, cmd := range map[string]*proc{"incarnation 3": inc3, "other node": other, "other job": otherJob, "unmarked": unmarked, "new agent": newAgent} {
		if !cmd.alive() {
			t.Errorf("%s: killed", name)
		}
	}
	// The record of incarnation 3 stays; that of 2 is gone.
	if _, err := os.Stat(filepath.Join(dir(job), "node1.example.3")); err != nil {
		t.Errorf("the replacement's record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir(job), "node1.example.2")); !os.IsNotExist(err) {
		t.Errorf("the fenced record: %v", err)
	}
}

func TestStaleRecordKillsNothing(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	target := Target{Job: "ft-stale", Node: "n", UpTo: 1}
	cmd := start(t)
	p, err := record(target, cmd.pid())
	if err != nil {
		t.Fatal(err)
	}
	// Same pid, another start time: a reused pid.
	if err := os.WriteFile(p, []byte(strconv.Itoa(cmd.pid())+" 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := Kill(target)
	if err != nil || len(res.Agents) != 0 {
		t.Fatalf("fence: %+v, %v", res, err)
	}
	if !cmd.alive() {
		t.Fatal("a process with the recorded pid but another start time was killed")
	}
}

func TestRegisterAndBadTargets(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	target := Target{Job: "ft-reg", Node: "n", UpTo: 1}
	remove, err := Register(target)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir(target.Job), "n.1")
	if pid, ok := registered(p); !ok || pid != os.Getpid() {
		t.Fatalf("registered: %d %v", pid, ok)
	}
	remove()
	if _, err := os.Stat(dir(target.Job)); !os.IsNotExist(err) {
		t.Fatalf("after remove: %v", err)
	}
	for _, bad := range []Target{{Job: "", Node: "n", UpTo: 1}, {Job: "../x", Node: "n", UpTo: 1}, {Job: "j", Node: "a/b", UpTo: 1}, {Job: "j", Node: "n"}} {
		if _, err := Kill(bad); err == nil {
			t.Errorf("Kill(%+v): no error", bad)
		}
		if _, err := Register(bad); err == nil {
			t.Errorf("Register(%+v): no error", bad)
		}
	}
}

// Registering prunes the records of agents that died without removing
// theirs, and keeps those of live ones.
func TestRegisterPrunesDeadRecords(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	live := start(t)
	dead := start(t)
	liveRec, err := record(Target{Job: "ft-a", Node: "n", UpTo: 1}, live.pid())
	if err != nil {
		t.Fatal(err)
	}
	deadRec, err := record(Target{Job: "ft-b", Node: "n", UpTo: 1}, dead.pid())
	if err != nil {
		t.Fatal(err)
	}
	_ = dead.cmd.Process.Kill()
	<-dead.done
	remove, err := Register(Target{Job: "ft-c", Node: "n", UpTo: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	if _, err := os.Stat(liveRec); err != nil {
		t.Errorf("a live agent's record was pruned: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(deadRec)); !os.IsNotExist(err) {
		t.Errorf("a dead agent's record (and its empty job directory) is still there: %v", err)
	}
}

// TestKillRecordsRankTimes: a fence appends the end of every rank it
// killed to the rank times its environment names (make chaos's overlap
// check), once the rank ended; a rank without them is not recorded.
func TestKillRecordsRankTimes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	job := "ft-fencetimes" + filepath.Base(t.TempDir())
	times := t.TempDir()
	target := Target{Job: job, Node: "node7", UpTo: 1}
	marks := []string{EnvJob + "=" + job, EnvNode + "=node7", EnvIncarnation + "=1"}
	before := time.Now()
	if err := AppendRankTime(times, RankTime{Node: "node7", Rank: 3, Inc: 2, Start: true, Time: before}); err != nil {
		t.Fatal(err)
	}
	r3 := start(t, append(marks, EnvRankTimes+"="+times, "FTLAUNCH_RANK=3", "FTLAUNCH_INCARNATION=2")...)
	untimed := start(t, append(marks, "FTLAUNCH_RANK=4", "FTLAUNCH_INCARNATION=1")...)
	if _, err := Kill(target); err != nil {
		t.Fatal(err)
	}
	if !r3.killed() || !untimed.killed() {
		t.Fatal("not killed")
	}
	got, err := ReadRankTimes(times)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[0].Start || got[1].Start || got[1].Node != "node7" || got[1].Rank != 3 || got[1].Inc != 2 || got[1].Time.Before(before) {
		t.Fatalf("rank times %+v, want rank 3's start and its end", got)
	}
}

// An agent that registers after a fence of its incarnation ran (its start
// raced the fence: its parent's host crashed as it started it) finds the
// fence's mark and is told to end; a later incarnation on the node is not,
// and a mark older than markTTL is pruned with the job's directory.
func TestRegisterAfterFence(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t2 := Target{Job: "ft-late", Node: "n", UpTo: 2}
	if _, err := Kill(t2); err != nil {
		t.Fatal(err)
	}
	for _, inc := range []uint64{1, 2} {
		_, err := Register(Target{Job: t2.Job, Node: "n", UpTo: inc})
		if !errors.Is(err, ErrFenced) {
			t.Errorf("incarnation %d registered after the fence of 1..2: %v, want ErrFenced", inc, err)
		}
		if _, err := os.Stat(filepath.Join(dir(t2.Job), "n."+strconv.FormatUint(inc, 10))); !os.IsNotExist(err) {
			t.Errorf("the fenced incarnation %d's record is left: %v", inc, err)
		}
	}
	// A lower fence later does not lower the mark.
	if _, err := Kill(Target{Job: t2.Job, Node: "n", UpTo: 1}); err != nil {
		t.Fatal(err)
	}
	if upTo, ok := readMark(t2); !ok || upTo != 2 {
		t.Errorf("mark after fences of 1..2 and 1..1: %d %v, want 2", upTo, ok)
	}
	remove, err := Register(Target{Job: t2.Job, Node: "n", UpTo: 3})
	if err != nil {
		t.Fatalf("incarnation 3 after a fence of 1..2: %v", err)
	}
	remove()
	// Another node of the job is not marked.
	remove, err = Register(Target{Job: t2.Job, Node: "m", UpTo: 1})
	if err != nil {
		t.Fatalf("node m after a fence of node n: %v", err)
	}
	remove()
	// An old mark goes.
	old := time.Now().Add(-markTTL - time.Minute)
	if err := os.Chtimes(markPath(t2), old, old); err != nil {
		t.Fatal(err)
	}
	remove, err = Register(Target{Job: "ft-other", Node: "n", UpTo: 1})
	if err != nil {
		t.Fatal(err)
	}
	remove()
	if _, err := os.Stat(dir(t2.Job)); !os.IsNotExist(err) {
		t.Errorf("an expired mark's job directory is still there: %v", err)
	}
}

// A fence and a registration racing: whatever their order, the agent is
// either killed by the fence or told it was fenced; never both missed.
func TestRegisterRacesFence(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for i := range 50 {
		tg := Target{Job: "ft-race" + strconv.Itoa(i), Node: "n", UpTo: 1}
		agent := start(t) // stands for the agent: registered under its pid
		regErr := make(chan error, 1)
		go func() {
			_, err := register(tg, agent.pid())
			regErr <- err
		}()
		res, err := Kill(tg)
		if err != nil {
			t.Fatal(err)
		}
		rerr := <-regErr
		if rerr != nil && !errors.Is(rerr, ErrFenced) {
			t.Fatal(rerr)
		}
		if len(res.Agents) == 0 && rerr == nil {
			t.Fatalf("round %d: the fence killed no agent and the registration saw no mark", i)
		}
	}
}

// Agents of one job registering at once on one machine (test nodes), each
// pruning the others' empty directories: every registration holds
// (make chaos at load 30: an agent failed with ENOENT twice in a row).
func TestRegisterConcurrent(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for round := range 20 {
		job := "ft-conc" + strconv.Itoa(round)
		errs := make(chan error, 16)
		var removes []func()
		done := make(chan func(), 16)
		for n := range 16 {
			go func() {
				// Half register for this job, half for jobs of their
				// own that they remove at once (emptying directories).
				tg := Target{Job: job, Node: "n" + strconv.Itoa(n), UpTo: 1}
				if n%2 == 1 {
					tg.Job = job + "x" + strconv.Itoa(n)
				}
				remove, err := Register(tg)
				errs <- err
				if err == nil && n%2 == 1 {
					remove()
					remove = func() {}
				}
				done <- remove
			}()
		}
		for range 16 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if r := <-done; r != nil {
				removes = append(removes, r)
			}
		}
		for _, r := range removes {
			r()
		}
	}
}
