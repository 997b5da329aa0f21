package main

import (
	"os"
	"path/filepath"
	"strconv"
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
	want := "agent up (in the front-end's process"
	if signalsInherited(t) {
		want = "agent up (a local process"
	}
	if r.code != 0 || strings.Contains(r.stderr, "ssh") || !strings.Contains(r.stderr, want) {
		t.Errorf("a local job with --verbose: exit %d:\n%s", r.code, r.stderr)
	}
	t.Setenv("FTLAUNCH_AGENT_INPROCESS", "0")
	r = ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-n", "2", "true")
	if r.code != 0 || strings.Contains(r.stderr, "ssh") || !strings.Contains(r.stderr, "agent up (a local process") {
		t.Errorf("a local job with --verbose and FTLAUNCH_AGENT_INPROCESS=0: exit %d:\n%s", r.code, r.stderr)
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
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
	r := ftlaunch(t, "", "status", "--state-dir", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "front-end lost; ranks were cleaned up by their agents") || strings.Contains(r.stdout, "running") {
		t.Errorf("status: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// A local job's agent runs in the front-end's process by default: the same
// job, the same exit codes, and --verbose says so. Under --restart it is
// a process (its loss is a failure the root recovers from), unless
// FTLAUNCH_AGENT_INPROCESS=1 asks otherwise.
func TestAgentInProcess(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-n", "1", "--restart", "rank", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "agent up (a local process on a socket pair)") {
		t.Errorf("--restart rank: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	t.Setenv("FTLAUNCH_AGENT_INPROCESS", "1")
	r = ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-l", "-n", "4", "sh", "-c", "echo hi $FTLAUNCH_RANK")
	want := "agent up (in the front-end's process"
	if signalsInherited(t) {
		// Run as a background job (SIGINT ignored, say): the agent stays
		// a process, or the ranks would inherit that.
		want = "agent up (a local process on a socket pair)"
	}
	if r.code != 0 || !strings.Contains(r.stderr, want) || strings.Count(r.stdout, "] hi ") != 4 {
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

// signalsInherited reports whether this test runs with signals ignored or
// blocked (as a shell's background job does), which ftlaunch, its child,
// inherits.
func signalsInherited(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && (k == "SigIgn" || k == "SigBlk") {
			if n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err != nil || n != 0 {
				return true
			}
		}
	}
	return false
}
