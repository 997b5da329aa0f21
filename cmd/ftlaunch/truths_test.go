package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// --verbose and inspect name how agents were started: "ssh" only for SSH.
func TestLaunchSaysHowAgentsStarted(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-n", "4", "--test-nodes", "2", "true")
	if r.code != 0 || strings.Contains(r.stderr, "ssh") || !strings.Contains(r.stderr, "agent up (process ") {
		t.Errorf("--test-nodes --verbose: exit %d:\n%s", r.code, r.stderr)
	}
	r = ftlaunch(t, "", "inspect", "--state-dir", dir)
	if r.code != 0 || strings.Contains(r.stdout, "ssh") || !strings.Contains(r.stdout, "start: process started after") {
		t.Errorf("inspect of a --test-nodes job: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-n", "2", "true")
	if r.code != 0 || strings.Contains(r.stderr, "ssh") || !strings.Contains(r.stderr, "agent up (a local process") {
		t.Errorf("a local job with --verbose: exit %d:\n%s", r.code, r.stderr)
	}
}

// attach to a failed job says why it failed.
func TestAttachSaysWhyTheJobFailed(t *testing.T) {
	dir := t.TempDir()
	if r := ftlaunch(t, "", "run", "--state-dir", dir, "-n", "2", "sh", "-c", "[ $FTLAUNCH_RANK = 1 ] && exit 6; sleep 30"); r.code != 6 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	r := ftlaunch(t, "", "attach", "--state-dir", dir)
	if r.code != 6 || !strings.Contains(r.stderr, "ftlaunch: rank 1 on node") || !strings.Contains(r.stderr, "exited with code 6") {
		t.Errorf("attach: exit %d, want 6 and the failure:\n%s", r.code, r.stderr)
	}
}

// status of a job whose front-end (its only root) was killed says what
// became of the ranks, not that they run.
func TestStatusAfterFrontEndKilled(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	cmd, _ := startBackground(t, m, "run", "--state-dir", dir, "-n", "4", "sleep", m)
	waitFor(t, "the job's state log to record the ranks", 20*time.Second, func() bool {
		dbs, _ := filepath.Glob(filepath.Join(dir, "ft-*", "*", "raft.db"))
		r := ftlaunch(t, "", "status", "--state-dir", dir)
		return len(dbs) == 1 && strings.Contains(r.stdout, "ranks: 4 running")
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitGone(t, "sleep "+m, 10*time.Second)
	waitGone(t, ftlaunchBin+" agent", 10*time.Second)
	r := ftlaunch(t, "", "status", "--state-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "front-end lost; ranks were cleaned up by their agents") || strings.Contains(r.stdout, "running") {
		t.Errorf("status: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// FTLAUNCH_AGENT_INPROCESS runs a local job's agent in the front-end's
// process: the same job, the same exit codes, and --verbose says so.
func TestAgentInProcess(t *testing.T) {
	t.Setenv("FTLAUNCH_AGENT_INPROCESS", "1")
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-l", "-n", "4", "sh", "-c", "echo hi $FTLAUNCH_RANK")
	if r.code != 0 || !strings.Contains(r.stderr, "agent up (in the front-end's process") || strings.Count(r.stdout, "] hi ") != 4 {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := ftlaunch(t, "", "run", "--state-dir", dir, "-n", "2", "sh", "-c", "exit 3"); r.code != 3 {
		t.Errorf("a failing rank: exit %d, want 3:\n%s", r.code, r.stderr)
	}
	r = ftlaunch(t, "", "inspect", "--state-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "exit code 3") || !strings.Contains(r.stdout, "invariants: ok") {
		t.Errorf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
