package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// rankProcess finds the process of rank's incarnation inc whose command
// line contains marker (a path unique to the test), or 0.
func rankProcess(marker string, rank int, inc uint64) int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cl, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !bytes.Contains(cl, []byte(marker)) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(p, "environ"))
		if err != nil {
			continue
		}
		vars := map[string]string{}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if k, v, ok := strings.Cut(string(kv), "="); ok {
				vars[k] = v
			}
		}
		if vars["FTLAUNCH_RANK"] == strconv.Itoa(rank) && vars["FTLAUNCH_INCARNATION"] == strconv.FormatUint(inc, 10) {
			pid, _ := strconv.Atoi(filepath.Base(p))
			return pid
		}
	}
	return 0
}

// ringSteps makes the ring application's steps last about 3 s (10 ms a
// step): the faults of a test usually fall while the ranks compute, so
// that they roll back and compute again; on a loaded machine they may
// fall while the ranks wait for their finish file (ringApp), which the
// job survives as well.
const ringSteps = "300"

// killRank SIGKILLs rank's first incarnation once it runs.
func killRank(t *testing.T, marker string, rank int) {
	t.Helper()
	var pid int
	waitFor(t, "rank "+strconv.Itoa(rank)+" to run", 30*time.Second, func() bool {
		pid = rankProcess(marker, rank, 1)
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank %d (pid %d): %v", rank, pid, err)
	}
}

// tablePublished waits until every rank of the job in stateDir holds the
// node table (a rank is replaced only then), as its live report says.
func tablePublished(t *testing.T, stateDir string) {
	t.Helper()
	waitLive(t, stateDir, "the node table", 60*time.Second, func(l *journal.Live) bool { return l.Table })
}

// liveReport is the live report of the latest job in stateDir, or nil
// (none yet, or the job ended).
func liveReport(stateDir string) *journal.Live {
	job, err := journal.Latest(stateDir)
	if err != nil {
		return nil
	}
	l, err := journal.ReadLive(job)
	if err != nil {
		return nil
	}
	return l
}

// waitLive waits until the live report of the latest job in stateDir
// (rewritten every second) satisfies cond.
func waitLive(t *testing.T, stateDir, what string, limit time.Duration, cond func(*journal.Live) bool) {
	t.Helper()
	waitFor(t, what, limit, func() bool {
		l := liveReport(stateDir)
		return l != nil && cond(l)
	})
}

// replicasJoined waits until n replica agents joined the state-log group
// of the latest job in stateDir (its live report's count).
func replicasJoined(t *testing.T, stateDir string, n int, limit time.Duration) {
	t.Helper()
	waitLive(t, stateDir, strconv.Itoa(n)+" replica agents in the group", limit, func(l *journal.Live) bool { return len(l.ReplicasJoined) >= n })
}

// recoveries waits until the root of the job in stateDir saw n
// recoveries to their end (its live report's count: a successor root
// counts from its takeover).
func recoveries(t *testing.T, stateDir string, n int) {
	t.Helper()
	waitLive(t, stateDir, strconv.Itoa(n)+" recoveries", 60*time.Second, func(l *journal.Live) bool { return l.Recoveries >= n })
}

// TestRestartRank is the restart protocol's acceptance: a 16-rank ring
// application on 8 test nodes with a replicated root, three ranks killed
// one after the other (rank 2 on node1, a node that hosts a root
// replica, then rank 9, then rank 13 inside the final allgather, which
// waits for rank 14 (held with --hold-rank until a recovery ran): each is
// started again as incarnation 2, the others roll back to their last
// common checkpoint, and the result is right.
func TestRestartRank(t *testing.T) {
	if testing.Short() {
		t.Skip("a 16-rank job with three recoveries")
	}
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--state-dir", dir, "--replicas", "3", "--restart", "rank", "--test-nodes", "8", "-n", "16")
	cmd.Args = append(cmd.Args, ringApp(t, ringSteps, ck, "--hold-rank", "14")...)
	out, errb := startJob(t, cmd)
	tablePublished(t, dir)
	for i, r := range []int{2, 9, 13} {
		if r == 13 {
			// Rank 14 is done with its steps and holds; the others are
			// done once their last checkpoint is written: from there,
			// their finish file made, they enter the final allgather,
			// which waits for rank 14.
			if err := os.WriteFile(finishFile(ck), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every rank at the end of its steps", 90*time.Second, func() bool {
				n, _ := filepath.Glob(filepath.Join(ck, "r*-s"+strings.Repeat("0", 10-len(ringSteps))+ringSteps+".ckpt"))
				_, err := os.Stat(filepath.Join(ck, ".hold-r000014"))
				return len(n) == 16 && err == nil
			})
		}
		killRank(t, ck, r)
		waitFor(t, "recovery "+strconv.Itoa(i+1), 60*time.Second, func() bool {
			return strings.Count(errb.String(), "recovered: every rank runs again") == i+1
		})
	}
	ringDone(t, cmd, out, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	for _, r := range []string{"rank 2 ", "rank 9 ", "rank 13 "} {
		if !strings.Contains(insp.stdout, r) {
			t.Errorf("inspect does not name %s:\n%s", r, insp.stdout)
		}
	}
	for _, ph := range []string{"suspend: epoch", "respawn: epoch", "patch: epoch", "resume: epoch", "resumed: epoch"} {
		if n := strings.Count(insp.stdout, ph); n < 3 {
			t.Errorf("inspect shows %q %d times, want 3:\n%s", ph, n, insp.stdout)
		}
	}
	if !strings.Contains(errb.String(), "suspended in the final allgather at step "+ringSteps+";") {
		t.Errorf("no rank says a recovery interrupted the final allgather")
	}
	if n := strings.Count(insp.stdout, "runs as incarnation 2"); n < 3 {
		t.Errorf("inspect shows %d ranks recovered as incarnation 2, want 3:\n%s", n, insp.stdout)
	}
	if left := rankProcess(ck, 0, 1); left != 0 {
		t.Errorf("rank 0 still runs (pid %d)", left)
	}
}

// startHeld starts a 12-rank ring application under --restart rank with a
// replicated root (3 replicas) whose front-end holds the first recovery at
// its committed phase hold (holdEnv), on the nodes where says; it waits
// until both replica agents joined the group and the node table exists.
// On failure, the test logs the front-end's stderr and the successor's log.
func startHeld(t *testing.T, hold string, where ...string) (cmd *exec.Cmd, errb *syncBuffer, dir, ck string) {
	t.Helper()
	dir, ck = t.TempDir(), t.TempDir()
	args := append([]string{"run", "--verbose", "--state-dir", dir, "--replicas", "3", "--restart", "rank", "-n", "12"}, where...)
	cmd = exec.Command(ftlaunchBin(t), append(args, ringApp(t, ringSteps, ck)...)...)
	cmd.Env = append(os.Environ(), "FTLAUNCH_TEST_HOLD_RECOVERY="+hold)
	_, errb = startJob(t, cmd) // logs the front-end's output
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "ft-*", "output", "ftlaunch.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	replicasJoined(t, dir, 2, 60*time.Second)
	tablePublished(t, dir)
	return cmd, errb, dir, ck
}

// attachRight attaches to the job of dir, which must end with exit 0 and
// the right checksum.
func attachRight(t *testing.T, dir, ck string) {
	t.Helper()
	if err := os.WriteFile(finishFile(ck), nil, 0o644); err != nil { // the ring may end
		t.Fatal(err)
	}
	r := ftlaunchLimit(t, 120*time.Second, "", "attach", "--state-dir", dir)
	if r.code != 0 {
		t.Fatalf("attach: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	i := strings.Index(r.stdout, "checksum")
	if i < 0 {
		t.Fatalf("no checksum in attach's output:\n%s", r.stdout)
	}
	if f := strings.Fields(r.stdout[i:]); len(f) < 4 || f[1] != f[3] {
		t.Fatalf("wrong result in attach's output:\n%s", r.stdout)
	}
}

// TestRestartRankFailoverMidRecovery kills the front-end (the root's
// leader) between the committed suspend of a recovery and its respawn: the
// successor carries the recovery on, the rank is started again exactly
// once, and attach ends with the job's success.
func TestRestartRankFailoverMidRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated job with a failover during a recovery")
	}
	cmd, errb, dir, ck := startHeld(t, "suspend", "--test-nodes", "6")
	killRank(t, ck, 5)
	waitFor(t, "the front-end to hold the recovery", 30*time.Second, func() bool {
		return strings.Contains(errb.String(), "test hook: holding the recovery at its committed suspend phase")
	})
	// status shows the recovery in progress (the live report, rewritten
	// once a second).
	last := ""
	defer func() {
		if t.Failed() {
			t.Logf("the last status while the recovery was held:\n%s", last)
		}
	}()
	waitFor(t, "status to show the recovery", 10*time.Second, func() bool {
		last = ftlaunch(t, "", "status", "--state-dir", dir).stdout
		return strings.Contains(last, "recovering rank(s) 5: at its suspend phase (epoch ")
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitFor(t, "the rank started again", 60*time.Second, func() bool { return rankProcess(ck, 5, 2) > 0 })
	attachRight(t, dir, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	if n := strings.Count(insp.stdout, "ranks: 1 rank(s) started: 5"); n != 1 {
		t.Errorf("rank 5 was started again %d time(s), want once:\n%s", n, insp.stdout)
	}
}

// TestRestartCountSurvivesFailover: under --restart rank --max-restarts 1,
// rank 5 is replaced once; then the front-end dies, and the successor
// counts that restart (from the rank's incarnation in the replicated
// table): rank 5's second failure ends the job instead of a second
// restart.
func TestRestartCountSurvivesFailover(t *testing.T) {
	e2eOnly(t, "recovery.TestRestartJobLeaderChange and TestRestartRankFailoverMidRecovery")
	if testing.Short() {
		t.Skip("a replicated job with a recovery and a failover")
	}
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--state-dir", dir, "--replicas", "3", "--restart", "rank", "--max-restarts", "1",
		"--test-nodes", "6", "-n", "12")
	cmd.Args = append(cmd.Args, ringApp(t, ringSteps, ck)...)
	_, errb := startJob(t, cmd)
	log := func() string {
		logs, _ := filepath.Glob(filepath.Join(dir, "ft-*", "output", "ftlaunch.log"))
		if len(logs) != 1 {
			return ""
		}
		b, _ := os.ReadFile(logs[0])
		return string(b)
	}
	defer func() {
		if t.Failed() {
			t.Logf("front-end's stderr:\n%s\nsuccessor's log:\n%s", errb.String(), log())
		}
	}()
	replicasJoined(t, dir, 2, 60*time.Second)
	tablePublished(t, dir)
	killRank(t, ck, 5)
	recoveries(t, dir, 1)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	waitFor(t, "a successor", 60*time.Second, func() bool { return strings.Contains(log(), "took over as root") })
	var pid int
	waitFor(t, "rank 5's second incarnation", 30*time.Second, func() bool {
		pid = rankProcess(ck, 5, 2)
		return pid > 0
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := ftlaunchLimit(t, 120*time.Second, "", "attach", "--state-dir", dir)
	if r.code != 128+9 {
		t.Fatalf("attach: exit %d, want 137\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 5 on node") || !strings.Contains(r.stderr, "it was restarted 1 time(s) (--max-restarts 1)") {
		t.Errorf("attach does not say why the job ended:\n%s", r.stderr)
	}
	if strings.Contains(log(), "restarting it as incarnation 3") {
		t.Errorf("the successor restarted rank 5 a second time")
	}
	waitFor(t, "the ranks to end", 30*time.Second, func() bool { return rankProcess(ck, 0, 1) == 0 })
}

// TestRestartJobDuringLaunch: under --restart job, a rank that fails while
// another node's agent is not up yet restarts the job once every agent is
// up: the late agent's ranks run as the same incarnation as the others
// (found by ftlaunch chaos: the restart waited 30 s for the late agent's
// acknowledgement, then ended the job).
func TestRestartJobDuringLaunch(t *testing.T) {
	e2eOnly(t, "recovery.TestRestartJob (a restart waits for every agent)")
	gate := filepath.Join(t.TempDir(), "go")
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "-l", "--restart", "job", "--test-nodes", "3", "--tree", "flat", "-n", "3", "sh", "-c",
		`case $FTLAUNCH_RANK$FTLAUNCH_INCARNATION in 01) exit 3;; *1) exec sleep 60;; esac; echo incarnation $FTLAUNCH_INCARNATION restarts $FTLAUNCH_RESTARTS`)
	cmd.Env = append(os.Environ(), "FTLAUNCH_TEST_DELAY_START=node2="+gate)
	out, errb := startJob(t, cmd)
	// node2 at least (node1 too if rank 0 failed before it was up: a
	// loaded machine).
	waitFor(t, "the restart to wait for node2", 60*time.Second, func() bool {
		return strings.Contains(errb.String(), "once the 1 agent(s) not up yet are") || strings.Contains(errb.String(), "once the 2 agent(s) not up yet are")
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 60*time.Second)
	for r := range 3 {
		if want := "[" + itoa(r) + "] incarnation 2 restarts 1\n"; !strings.Contains(out.String(), want) {
			t.Errorf("no %q", want)
		}
	}
}

// TestRestartJobAlwaysFails: a rank that fails in every incarnation ends
// the job after --max-restarts restarts, naming the rank and its history,
// with its last failure's exit code, and nothing left running.
func TestRestartJobAlwaysFails(t *testing.T) {
	e2eOnly(t, "recovery.TestRestartMaxRestarts")
	m := marker(t)
	r := ftlaunch(t, "", "run", "--restart", "job", "--max-restarts", "2", "-n", "3", "sh", "-c",
		`[ "$FTLAUNCH_RANK" = 1 ] && { sleep 0.2; exit 5; }; exec sleep `+m)
	if r.code != 5 {
		t.Fatalf("exit %d, want 5\n%s", r.code, r.stderr)
	}
	want := "rank 1 on node"
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "(--max-restarts 2): incarnation 1 exited with code 5, incarnation 2 exited with code 5, incarnation 3 exited with code 5") {
		t.Errorf("stderr does not name the rank and its history:\n%s", r.stderr)
	}
	if n := strings.Count(r.stderr, "restarting the job"); n != 2 {
		t.Errorf("%d restarts, want 2:\n%s", n, r.stderr)
	}
	if left := liveProcesses(t, "sleep "+m); len(left) > 0 {
		t.Errorf("ranks left running: %v", left)
	}
}

// TestRestartRankRefusesMPI: under --restart rank an MPI program ends the
// job at its first PMI init, pointing to --restart job.
func TestRestartRankRefusesMPI(t *testing.T) {
	prog := mpiProgram(t, "mpi_hello")
	r := ftlaunch(t, "", "run", "--restart", "rank", "-n", "2", prog)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// TestRestartFlags: bad values are refused with a clear line.
func TestRestartFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--restart sometimes", `--restart "sometimes": want none, rank or job`},
		{"--max-restarts -1", `--max-restarts "-1": want a number of restarts`},
	} {
		r := ftlaunch(t, "", append(append([]string{"run"}, strings.Fields(tc.args)...), "true")...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q", tc.args, r.code, r.stderr)
		}
	}
}

// TestRestartJobMPICH: under --restart job an MPICH program that
// checkpoints is restarted from its checkpoint after one rank is killed
// and completes; with --max-restarts 1 a second kill ends the job with a
// clear line.
func TestRestartJobMPICH(t *testing.T) {
	prog := mpiProgram(t, "mpi_ckpt")
	for _, tc := range []struct {
		kills int
		code  int
	}{{1, 0}, {2, 137}} {
		ck, dir := t.TempDir(), t.TempDir()
		cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--restart", "job", "--max-restarts", "1", "-n", "4", prog, ck, "300", "10")
		out, errb := startJob(t, cmd)
		for k := 1; k <= tc.kills; k++ {
			inc := uint64(k)
			var pid int
			waitFor(t, "a checkpoint of rank 2's incarnation", 60*time.Second, func() bool {
				pid = rankProcess(prog, 2, inc)
				_, err := os.Stat(filepath.Join(ck, "rank-2"))
				return pid > 0 && err == nil
			})
			if k == 1 {
				// Let the job get past its first checkpoint.
				st, _ := os.Stat(filepath.Join(ck, "rank-2"))
				waitFor(t, "a later checkpoint", 30*time.Second, func() bool {
					st2, err := os.Stat(filepath.Join(ck, "rank-2"))
					return err == nil && st2.ModTime().After(st.ModTime())
				})
			}
			syscall.Kill(pid, syscall.SIGKILL)
			if k < tc.kills {
				recoveries(t, dir, k)
			}
		}
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != tc.code {
			t.Fatalf("%d kill(s): exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.kills, code, tc.code, out.String(), errb.String())
		}
		if tc.kills == 1 {
			f := strings.Fields(out.String())
			if len(f) < 6 || f[0] != "steps" || f[3] != f[5] {
				t.Errorf("wrong result: %q", out.String())
			}
			if !strings.Contains(errb.String(), "restarted from step") || strings.Contains(errb.String(), "restarted from step 0 ") {
				t.Errorf("the job did not restart from a checkpoint:\n%s", errb.String())
			}
		} else if !strings.Contains(errb.String(), "the job was restarted 1 time(s) (--max-restarts 1)") {
			t.Errorf("no clear line for the second failure:\n%s", errb.String())
		}
	}
}
