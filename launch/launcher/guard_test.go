package launcher

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// startGroup starts `sleep 60` in a session (and process group) of its own,
// as a rank is, and returns it; the test reaps it.
func startGroup(t *testing.T) *exec.Cmd {
	t.Helper()
	return startGroupEnv(t)
}

// startGroupEnv is startGroup with an environment.
func startGroupEnv(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// exited waits up to limit for cmd to end and returns how it ended.
func exited(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("pid %d still runs after %v", cmd.Process.Pid, limit)
		return nil
	}
}

// The guard signals the groups it was told of when its input ends without
// "end" (the front-end died), and leaves them alone when released.
func TestOrphanGuard(t *testing.T) {
	g, err := StartGuard("")
	if err != nil {
		t.Skipf("no guard here: %v", err)
	}
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	victim := startGroup(t)
	g.Add(victim.Process.Pid)
	// The front-end's death, as the guard sees it: its input ends.
	g.mu.Lock()
	g.w.Close()
	g.w = nil
	g.mu.Unlock()
	err = exited(t, victim, 10*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the group's process ended with %v, want SIGTERM", err)
	}
	if err := g.cmd.Wait(); err != nil {
		t.Errorf("guard: %v", err)
	}

	g, err = StartGuard("")
	if err != nil {
		t.Fatal(err)
	}
	spared := startGroup(t)
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	g.Add(spared.Process.Pid)
	g.Release() // returns once the guard exited
	g.Release() // and again at once
	if err := spared.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("a released guard signalled its group: %v", err)
	}
}

// TestOrphanGuardFindsJob: a process of the job the guard was never told
// of (the front-end died between a rank's fork and telling the guard) is
// found by its FTLAUNCH_JOBID and signalled too; another job's is not.
func TestOrphanGuardFindsJob(t *testing.T) {
	job := fmt.Sprintf("ft-guardtest-%d", os.Getpid())
	g, err := StartGuard(job)
	if err != nil {
		t.Skipf("no guard here: %v", err)
	}
	if err := g.Ready(); err != nil {
		t.Fatal(err)
	}
	unnamed := startGroupEnv(t, "FTLAUNCH_JOBID="+job)
	other := startGroupEnv(t, "FTLAUNCH_JOBID="+job+"-other")
	g.mu.Lock()
	g.w.Close() // the front-end's death: the guard's input ends
	g.w = nil
	g.mu.Unlock()
	err = exited(t, unnamed, 10*time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("the job's process the guard was not told of ended with %v, want SIGTERM", err)
	}
	if err := g.cmd.Wait(); err != nil {
		t.Errorf("guard: %v", err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("another job's process was signalled: %v", err)
	}
}
