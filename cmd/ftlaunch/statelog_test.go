package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unprivileged returns credentials of the nobody user and a directory
// holding a copy of ftlaunch that nobody can run (the tests' own build
// directory is root's alone). It skips the test unless it runs as root.
func unprivileged(t *testing.T) (*syscall.Credential, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run ftlaunch as another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no nobody user: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "ftlaunch-nobody-") // t.TempDir's parent is root's alone
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "ftlaunch")
	src, err := os.Open(ftlaunchBin(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, dir
}

// runAs runs ftlaunch from dir with the given credentials and environment
// (or, when args[0] is a flag, prlimit with args: ftlaunch under limits).
func runAs(t *testing.T, cred *syscall.Credential, dir string, env []string, limit time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	bin := filepath.Join(dir, "ftlaunch")
	if strings.HasPrefix(args[0], "-") {
		bin = "prlimit"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("ftlaunch %q hung; stderr:\n%s", args, r.stderr)
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("ftlaunch %q: %v", args, err)
	}
	return r
}

// A home directory that cannot be written does not stop a run: one
// warning, the job runs with its state in memory, and nothing is left.
func TestUnwritableStateDir(t *testing.T) {
	cred, dir := unprivileged(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o555); err != nil { // root's, read-only to nobody
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	r := runAs(t, cred, dir, env, 60*time.Second, "run", "-n", "3", "--test-nodes", "2", "sh", "-c", "echo hi $FTLAUNCH_RANK")
	if r.code != 0 || strings.Count(r.stdout, "hi ") != 3 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "permission denied") || !strings.Contains(lines[0], "in memory") {
		t.Errorf("want one warning naming the problem, got:\n%s", r.stderr)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 0 {
		t.Errorf("the home directory has %d entries", len(ents))
	}
	// A failing job says why, and no state path.
	r = runAs(t, cred, dir, env, 60*time.Second, "run", "-n", "2", "sh", "-c", "exit 4")
	if r.code != 4 || strings.Contains(r.stderr, "state in /") {
		t.Errorf("exit %d, want 4 and no state path:\n%s", r.code, r.stderr)
	}
	// A replica group needs its files.
	r = runAs(t, cred, dir, env, 60*time.Second, "run", "-n", "3", "--test-nodes", "3", "--replicas", "3", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "permission denied") {
		t.Errorf("--replicas 3 without a state directory: exit %d:\n%s", r.code, r.stderr)
	}
}

// The default state directory keeps the newest --keep-logs (or
// $FTLAUNCH_KEEP_LOGS) job logs, skipping a locked one; an explicit
// --state-dir is never pruned.
func TestKeepLogs(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	jobs := filepath.Join(state, "ftlaunch", "jobs")
	count := func() []string {
		m, _ := filepath.Glob(filepath.Join(jobs, "ft-*"))
		return m
	}
	for range 4 {
		if r := ftlaunch(t, "", "run", "--keep-logs", "0", "true"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	if n := len(count()); n != 4 {
		t.Fatalf("--keep-logs 0 kept %d logs of 4", n)
	}
	// A fake old job whose log another process holds locked.
	locked := filepath.Join(jobs, "ft-00000000lock", "node")
	if err := os.MkdirAll(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(locked, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Dir(locked), old, old); err != nil {
		t.Fatal(err)
	}
	r := ftlaunch(t, "", "run", "--keep-logs", "2", "true")
	left := count()
	if r.code != 0 || len(left) != 3 {
		t.Fatalf("--keep-logs 2: exit %d, left %q: %s", r.code, left, r.stderr)
	}
	latest, err := os.Readlink(filepath.Join(jobs, "latest"))
	if err != nil || !strings.Contains(strings.Join(left, " "), latest) || !strings.Contains(strings.Join(left, " "), "ft-00000000lock") {
		t.Errorf("kept %q; want the latest job (%s, %v) and the locked one", left, latest, err)
	}
	t.Setenv("FTLAUNCH_KEEP_LOGS", "1")
	f.Close() // unlocks
	if r := ftlaunch(t, "", "run", "true"); r.code != 0 || len(count()) != 1 {
		t.Errorf("FTLAUNCH_KEEP_LOGS=1: exit %d, left %q: %s", r.code, count(), r.stderr)
	}
	own := t.TempDir()
	for range 3 {
		if r := ftlaunch(t, "", "run", "--state-dir", own, "--keep-logs", "1", "true"); r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(own, "ft-*")); len(m) != 3 {
		t.Errorf("an explicit --state-dir was pruned: %q", m)
	}
}

// More ranks than the user may start processes: one clear line naming the
// limit and the rank, exit 1, no crash, nothing left running. With one
// node the agent sees beforehand that they do not fit; with two, each
// node's share fits alone and the second node's forks fail midway.
func TestTooManyRanks(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	cred, dir := unprivileged(t)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	for _, tc := range []struct{ n, nodes string }{{"5000", "0"}, {"400", "2"}} {
		t.Run(tc.n+"_nodes"+tc.nodes, func(t *testing.T) {
			m := marker(t)
			r := runAs(t, cred, dir, env, 120*time.Second, "--nproc=300", filepath.Join(dir, "ftlaunch"), "run", "-n", tc.n, "--test-nodes", tc.nodes, "sleep", m)
			t.Logf("exit %d after %v; stderr:\n%s", r.code, r.elapsed, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 1 || len(lines) < 1 || !strings.Contains(lines[0], "could not start") || !strings.Contains(lines[0], "RLIMIT_NPROC") ||
				!strings.HasPrefix(lines[0], "ftlaunch: rank ") {
				t.Errorf("want exit 1 and a first line naming the rank and the limit")
			}
			if tc.nodes == "0" && (len(lines) != 2 || !strings.Contains(lines[1], "state in /")) {
				t.Errorf("want one line and the state's path, got %d lines", len(lines))
			}
			if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "pthread_create") {
				t.Errorf("a crash")
			}
			waitGone(t, "sleep "+m, 10*time.Second)
			waitGone(t, filepath.Join(dir, "ftlaunch"), 10*time.Second)
		})
	}
}
