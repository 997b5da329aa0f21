package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sigWrapEnv makes the test binary start the program in its arguments the
// way a careless parent would: SIGINT, SIGHUP, SIGPIPE and SIGQUIT
// ignored, SIGUSR1 and SIGALRM blocked.
const sigWrapEnv = "FTLAUNCH_E2E_SIGWRAP"

func init() {
	if os.Getenv(sigWrapEnv) == "" {
		return
	}
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGQUIT)
	runtime.LockOSThread()
	var set unix.Sigset_t
	set.Val[0] = 1<<(uint(syscall.SIGUSR1)-1) | 1<<(uint(syscall.SIGALRM)-1)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &set, nil); err != nil {
		fmt.Fprintln(os.Stderr, "sigwrap:", err)
		os.Exit(3)
	}
	args := os.Args[1:]
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, sigWrapEnv+"=") })
	fmt.Fprintln(os.Stderr, "sigwrap:", syscall.Exec(args[0], args, env))
	os.Exit(3)
}

// Ranks start with default dispositions and an empty signal mask, even
// when ftlaunch itself started with signals ignored and blocked; a rank
// whose pipe reader leaves dies of SIGPIPE quietly.
func TestRanksStartWithDefaultSignals(t *testing.T) {
	for _, nodes := range []string{"0", "2"} {
		cmd := exec.Command(os.Args[0], ftlaunchBin(t), "run", "-n", "2", "--test-nodes", nodes,
			"sh", "-c", "grep -E '^Sig(Blk|Ign)' /proc/self/status; yes | head -1")
		cmd.Env = append(os.Environ(), sigWrapEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("--test-nodes %s: %v\n%s", nodes, err, out)
		}
		for _, want := range []string{"SigBlk:\t0000000000000000", "SigIgn:\t0000000000000000", "y\n"} {
			if strings.Count(string(out), want) != 2 {
				t.Errorf("--test-nodes %s: want %q from both ranks:\n%s", nodes, want, out)
			}
		}
		if strings.Contains(string(out), "Broken pipe") {
			t.Errorf("--test-nodes %s: a rank ignores SIGPIPE:\n%s", nodes, out)
		}
	}
}

// exitCode waits for cmd, failing the test after limit, and returns its
// exit code and how long the wait took.
func exitCode(t *testing.T, cmd *exec.Cmd, limit time.Duration, stderr fmt.Stringer) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, time.Since(start)
		case errors.As(err, &ee):
			return ee.ExitCode(), time.Since(start)
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(limit):
		// A hang: SIGQUIT makes the Go runtime write every goroutine's
		// stack to the stderr the test prints (ftlaunch does not catch
		// it), then the process is killed.
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		t.Fatalf("still running %v after the signal; stderr (with the goroutines' stacks):\n%s", limit, stderr)
	}
	return 0, 0
}

// SIGINT, SIGTERM and SIGHUP end the job with 128+N and leave nothing
// running; the ranks that the signal killed are not reported as failures.
func TestTerminatingSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			m := marker(t)
			cmd, errb := startBackground(t, m, "run", "-n", "4", "--test-nodes", "2", "sh", "-c", "sleep "+m)
			cmd.Process.Signal(sig)
			code, _ := exitCode(t, cmd, 30*time.Second, errb)
			if code != 128+int(sig) {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, 128+int(sig), errb)
			}
			if strings.Contains(errb.String(), "ranks failed") || strings.Contains(errb.String(), "killed by signal") {
				t.Errorf("ranks the signal ended are reported as failures:\n%s", errb)
			}
			waitGone(t, "sleep "+m, 5*time.Second)
			waitGone(t, ftlaunchBin(t)+" agent", 5*time.Second)
		})
	}
}

// SIGUSR1, SIGUSR2 and SIGTSTP reach every rank and the job goes on; a
// SIGCONT reaches them after the stop it ends, not alone (it ended a stop
// of the front-end itself: issue 27 item 5).
func TestUserSignalsForwarded(t *testing.T) {
	m := marker(t)
	cmd := exec.Command(ftlaunchBin(t), "run", "-n", "4", "--test-nodes", "2", "sh", "-c",
		"trap 'echo got-usr1' USR1; trap 'echo got-usr2' USR2; trap 'echo got-cont' CONT; echo ready; while :; do sleep "+m+" & wait; done")
	out, errb := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "every rank to trap the signals", 20*time.Second, func() bool { return strings.Count(out.String(), "ready") == 4 })
	// A SIGCONT of its own, as after a SIGSTOP of the front-end: not the
	// ranks'. The signals that follow travel the same way, after it.
	cmd.Process.Signal(syscall.SIGCONT)
	for _, s := range []struct {
		sig  syscall.Signal
		seen string
	}{{syscall.SIGUSR1, "got-usr1"}, {syscall.SIGUSR2, "got-usr2"}} {
		cmd.Process.Signal(s.sig)
		waitFor(t, s.seen+" from every rank", 20*time.Second, func() bool { return strings.Count(out.String(), s.seen) == 4 })
	}
	if n := strings.Count(out.String(), "got-cont"); n != 0 {
		t.Fatalf("a SIGCONT that followed no forwarded stop reached %d rank(s); stderr:\n%s", n, errb)
	}
	// Ctrl-Z's SIGTSTP stops every rank (the shells and their sleeps);
	// the SIGCONT after it resumes them. (Sent together, the two may
	// reach the front-end in either order: the runtime delivers pending
	// signals by number, SIGCONT's first.)
	cmd.Process.Signal(syscall.SIGTSTP)
	waitFor(t, "every rank stopped", 20*time.Second, func() bool {
		n := 0
		for _, p := range rankProcs(t, "sleep "+m) {
			if p.env["FTLAUNCH_RANK"] == "" {
				continue // ftlaunch run itself: its command line has the script
			}
			if st, _, ok := procStat(p.pid); !ok || st != 'T' {
				return false
			}
			n++ // a rank's shell or its sleep
		}
		return n >= 4
	})
	cmd.Process.Signal(syscall.SIGCONT)
	waitFor(t, "got-cont from every rank", 20*time.Second, func() bool { return strings.Count(out.String(), "got-cont") == 4 })
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil || len(liveProcesses(t, "sleep "+m)) == 0 {
		t.Fatalf("the job did not go on after the signals: %v; stderr:\n%s", err, errb)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := exitCode(t, cmd, 30*time.Second, errb); code != 128+15 {
		t.Errorf("exit %d after SIGTERM, want 143; stderr:\n%s", code, errb)
	}
	waitGone(t, "sleep "+m, 5*time.Second)
}

// openPTY returns a pseudo-terminal's controller and its terminal.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		ptm.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		ptm.Close()
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptm.Close()
		t.Fatalf("open terminal: %v", err)
	}
	return ptm, pts
}

// Ctrl-C typed on the terminal ftlaunch runs in ends an MPICH job: exit
// 130, nothing left running.
func TestCtrlCEndsMPIJob(t *testing.T) {
	loop := mpiProgram(t, "mpi_loop")
	ptm, pts := openPTY(t)
	defer ptm.Close()
	cmd := exec.Command(ftlaunchBin(t), "run", "-n", "4", loop)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	term := &syncBuffer{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		io.Copy(term, ptm) // ends with EIO once the terminal's last user is gone
	}()
	waitFor(t, "the MPI ranks to loop", 60*time.Second, func() bool { return strings.Contains(term.String(), "looping") })
	if _, err := ptm.Write([]byte{3}); err != nil { // ^C: the terminal sends SIGINT to its foreground group
		t.Fatal(err)
	}
	code, took := exitCode(t, cmd, 30*time.Second, term)
	t.Logf("the job ended %v after Ctrl-C", took)
	if code != 130 {
		t.Errorf("exit %d after Ctrl-C, want 130; terminal:\n%s", code, term)
	}
	if took > 10*time.Second {
		t.Errorf("the job took %v to end after Ctrl-C", took)
	}
	waitGone(t, loop, 5*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 5*time.Second)
}

// With --replicas 3, SIGHUP (a dropped terminal) detaches the front-end:
// it exits 129 and the job goes on under a root replica, which attach
// follows to the job's end.
func TestHangupDetachesReplicatedJob(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "go")
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--replicas", "3", "--test-nodes", "4", "--verbose", "-n", "4",
		"sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo done $FTLAUNCH_RANK")
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	replicasJoined(t, dir, 2, 60*time.Second)
	cmd.Process.Signal(syscall.SIGHUP)
	if code, _ := exitCode(t, cmd, 30*time.Second, errb); code != 129 || !strings.Contains(errb.String(), "goes on under a root replica") {
		t.Fatalf("after SIGHUP: exit %d, want 129 and the job going on; stderr:\n%s", code, errb)
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := ftlaunchLimit(t, 120*time.Second, "", "attach", "--state-dir", dir)
	if r.code != 0 {
		t.Fatalf("attach: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for rank := range 4 {
		if want := fmt.Sprintf("[%d] done %d\n", rank, rank); !strings.Contains(r.stdout, want) {
			t.Errorf("attach did not show %q:\n%s", want, r.stdout)
		}
	}
	waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)
}
