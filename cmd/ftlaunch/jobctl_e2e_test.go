package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/launch/jobctl"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"golang.org/x/sys/unix"
)

// listJobs runs ftlaunch jobs --json.
func listJobs(t *testing.T, dir string) []jobctl.Job {
	t.Helper()
	r := ftlaunch(t, "", "jobs", "--json", "--state-dir", dir)
	var jobs []jobctl.Job
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &jobs) != nil {
		t.Fatalf("jobs --json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	return jobs
}

// readStatus runs ftlaunch status --json.
func readStatus(t *testing.T, dir, job string) jobstate.Status {
	t.Helper()
	r := ftlaunch(t, "", "status", "--json", "--state-dir", dir, job)
	var st jobstate.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	return st
}

// background starts ftlaunch run in the background with ranks that
// sleep m seconds; at the test's end it is killed if still there, and so
// are the agents and ranks it left (a replicated job outlives its
// front-end).
func background(t *testing.T, m string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	killLeft(t, "sleep "+m)
	cmd := exec.Command(ftlaunchBin(t), append(args, "sleep", m)...)
	_, errb := startJob(t, cmd)
	return cmd, errb
}

// sleeping counts the ranks that sleep m seconds (not the front-end,
// whose command line names them too).
func sleeping(t *testing.T, m string) int {
	n := 0
	for _, p := range liveProcesses(t, "sleep "+m) {
		if !strings.Contains(p, "ftlaunch") {
			n++
		}
	}
	return n
}

// TestCancelAfterFailover: a replicated job whose front-end was SIGKILLed
// is listed running, cancel reaches its successor root and ends it with
// nothing left, jobs then lists it cancelled, and status --exit-code
// exits non-zero.
func TestCancelAfterFailover(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	cmd, errb := background(t, m, "run", "--state-dir", dir, "--replicas", "3", "--test-nodes", "4", "--verbose", "-n", "8")
	defer func() {
		if t.Failed() {
			t.Logf("front-end's stderr:\n%s\nsuccessor's log:\n%s", errb.String(), successorLogs(t, dir))
		}
	}()
	replicasJoined(t, dir, 2, 60*time.Second)
	waitFor(t, "every rank to run", 30*time.Second, func() bool { return sleeping(t, m) == 8 })
	// ps tells the agents apart: each names its node (and its job and
	// incarnation, for the fence: proto.AgentArgs).
	for _, node := range []string{"node0", "node1", "node2", "node3"} {
		if len(liveProcesses(t, ftlaunchBin(t)+" agent "+node+" --job ")) != 1 {
			t.Errorf("no agent process names node %s: %q", node, liveProcesses(t, ftlaunchBin(t)+" agent"))
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	jobs := listJobs(t, dir)
	if len(jobs) != 1 || jobs[0].State != "running" || jobs[0].Ranks != 8 && jobs[0].Ranks != 0 {
		t.Fatalf("jobs after the front-end's death: %+v", jobs)
	}
	id := jobs[0].ID
	start := time.Now()
	r := ftlaunch(t, "", "cancel", "--state-dir", dir, id)
	if r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("cancel took %v: %s", time.Since(start), r.stdout)
	waitGone(t, "sleep "+m, 20*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)

	jobs = listJobs(t, dir)
	if len(jobs) != 1 || jobs[0].State != "cancelled" || jobs[0].ExitCode == nil || *jobs[0].ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("jobs after cancel: %+v", jobs)
	}
	st := readStatus(t, dir, id)
	if st.UserSignal != "SIGTERM" || len(st.NotRecovered) != 0 || len(st.Failures) != 0 {
		t.Errorf("status after cancel: user signal %q, not recovered %q, failures %q", st.UserSignal, st.NotRecovered, st.Failures)
	}
	if r := ftlaunch(t, "", "status", "--exit-code", "--state-dir", dir, id); r.code == 0 {
		t.Errorf("status --exit-code of a cancelled job exited 0:\n%s", r.stdout)
	}
	// The plan names the root where it runs now, not the lost front-end.
	var rep journal.Report
	if r := ftlaunch(t, "", "inspect", "--json", "--state-dir", dir); json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Leader == "" {
		t.Errorf("inspect --json: leader %q\n%s", rep.Leader, r.stderr)
	} else if r := ftlaunch(t, "", "inspect", "--state-dir", dir); !strings.Contains(r.stdout, "on node "+rep.Leader+" since it took over") ||
		!regexp.MustCompile(`(?m)^  node\d\s+1\s+`+rep.Leader+` \(root\)`).MatchString(r.stdout) || strings.Contains(r.stdout, "never joined") {
		t.Errorf("inspect's plan after the takeover by %s:\n%s", rep.Leader, r.stdout)
	}
	// A finished job: one line, exit 1.
	if r := ftlaunch(t, "", "cancel", "--state-dir", dir, id); r.code != 1 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("cancel of an ended job: exit %d\n%s", r.code, r.stderr)
	}
}

// TestKillSignal: kill --signal USR1 reaches every rank through the
// front-end; the ranks it kills were ended by the user: under --restart
// rank nothing is restarted, no failure is recorded, and the job is
// cancelled with 128+SIGUSR1.
func TestKillSignal(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	cmd, errb := background(t, m, "run", "--state-dir", dir, "--test-nodes", "2", "--restart", "rank", "-n", "4")
	waitFor(t, "every rank to run", 30*time.Second, func() bool { return sleeping(t, m) == 4 })
	r := ftlaunch(t, "", "kill", "--signal", "USR1", "--state-dir", dir, "latest")
	if r.code != 0 {
		t.Fatalf("kill: exit %d\n%s%s\nfront-end:\n%s", r.code, r.stdout, r.stderr, errb.String())
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGUSR1) {
		t.Errorf("front-end: %v, want exit %d\n%s", err, 128+int(syscall.SIGUSR1), errb.String())
	}
	st := readStatus(t, dir, "")
	if st.Word() != "cancelled" || st.UserSignal != "SIGUSR1" || len(st.Failures) != 0 || st.Recoveries != 0 || st.Restart != "rank" {
		t.Errorf("status after kill: %s, user signal %q, failures %q, recoveries %d, restart %q", st.Word(), st.UserSignal, st.Failures, st.Recoveries, st.Restart)
	}
}

// TestCancelLocal: a job without a launch tree (every rank on the
// front-end's host, no listener) is cancelled through its front-end's
// PID.
func TestCancelLocal(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	cmd, _ := background(t, m, "run", "--state-dir", dir, "-n", "2")
	waitFor(t, "every rank to run", 30*time.Second, func() bool { return sleeping(t, m) == 2 })
	if r := ftlaunch(t, "", "cancel", "--state-dir", dir, "latest"); r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cmd.Wait()
	if jobs := listJobs(t, dir); len(jobs) != 1 || jobs[0].State != "cancelled" {
		t.Errorf("jobs after cancel: %+v", jobs)
	}
}

// TestAttachTellsTheStory: attach to a replicated job whose front-end was
// SIGKILLed shows the new root's lines (the takeover, a rank's restart)
// on stderr; Ctrl-C in attach ends the job as the user's SIGINT, which
// nothing restarts (--restart rank), and attach exits with 130.
func TestAttachTellsTheStory(t *testing.T) {
	dir, ck := t.TempDir(), t.TempDir()
	killLeft(t, ck)
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--replicas", "3", "--test-nodes", "4", "--restart", "rank", "--verbose", "-n", "8",
		ftlaunchBin(t), "ringapp", "--steps", "100000", "--step-time", "10ms", "--dir", ck)
	startJob(t, cmd)
	defer func() {
		if t.Failed() {
			t.Logf("successor's log:\n%s", successorLogs(t, dir))
		}
	}()
	replicasJoined(t, dir, 2, 60*time.Second)
	tablePublished(t, dir)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	att := exec.Command(ftlaunchBin(t), "attach", "--state-dir", dir)
	aout, aerr := &syncBuffer{}, &syncBuffer{}
	att.Stdout, att.Stderr = aout, aerr
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { att.Process.Kill(); att.Wait() })
	defer func() {
		if t.Failed() {
			t.Logf("attach's stderr:\n%s", aerr.String())
		}
	}()
	waitFor(t, "attach to show the takeover", 60*time.Second, func() bool { return strings.Contains(aerr.String(), "took over as root") })
	// A rank killed now is restarted by the new root, and attach says so.
	killRank(t, ck, 3)
	waitFor(t, "the rank to run again", 60*time.Second, func() bool { return rankProcess(ck, 3, 2) > 0 })
	waitFor(t, "attach to show the rank's restart", 30*time.Second, func() bool { return strings.Contains(aerr.String(), "incarnation 2") })
	waitFor(t, "attach to show the recovery over", 60*time.Second, func() bool { return strings.Contains(aerr.String(), "ftlaunch: recovered: ") })

	att.Process.Signal(syscall.SIGINT)
	err := att.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Errorf("attach after Ctrl-C: %v, want exit 130", err)
	}
	waitGone(t, ck, 20*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)
	st := readStatus(t, dir, "")
	if st.Word() != "cancelled" || st.UserSignal != "SIGINT" || len(st.NotRecovered) != 0 || st.Recoveries != 1 {
		t.Errorf("status after Ctrl-C in attach: %s, user signal %q, not recovered %q, recoveries %d (failures %q)", st.Word(), st.UserSignal, st.NotRecovered, st.Recoveries, st.Failures)
	}
	// On the ended job, attach says so in one line and exits with its code.
	r := ftlaunch(t, "", "attach", "--state-dir", dir)
	if r.code != 130 || !strings.HasPrefix(r.stderr, "ftlaunch attach: job "+st.Job+" has ended: cancelled, exit code 130\n") {
		t.Errorf("attach on the ended job: exit %d\n%s", r.code, r.stderr)
	}
}

// killLeft kills, at the test's end, the agents and ranks a job left
// (a replicated job outlives its front-end): processes of this test
// binary's agents, and those whose command line holds marker.
func killLeft(t *testing.T, marker string) {
	t.Cleanup(func() {
		for _, p := range append(liveProcesses(t, ftlaunchBin(t)+" agent"), liveProcesses(t, marker)...) {
			if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// jobProcesses lists the processes whose environment names job (as
// launch/fence finds a job's ranks): "pid cmdline".
func jobProcesses(t *testing.T, job string) []string {
	t.Helper()
	return processes(t, func(pid int, _ []byte) bool {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && slices.Contains(strings.Split(string(env), "\x00"), "FTLAUNCH_JOBID="+job)
	})
}

// subreaperEnv makes the test binary a subreaper that runs its arguments
// as a command (subreaperMain).
const subreaperEnv = "FTLAUNCH_E2E_SUBREAPER"

// subreaperMain runs argv as a child and reaps every process it adopts,
// until none is left. The agents a front-end leaves are adopted by it
// instead of init: their process groups stay in a session with a parent
// outside them, so a stopped agent is not woken (SIGHUP, SIGCONT) as a
// stopped member of an orphaned process group is.
func subreaperMain(argv []string) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		return 1
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		return 1
	}
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
			return 0
		}
	}
}

// copiedStatus reads the status of the latest job of stateDir from a copy
// of its replicas' files (nil: none readable yet).
func copiedStatus(t *testing.T, stateDir string) *jobstate.Status {
	t.Helper()
	jobDir, err := journal.Latest(stateDir)
	if err != nil {
		return nil
	}
	dbs, _ := filepath.Glob(filepath.Join(jobDir, "*", raftstore.DBFile))
	cp := t.TempDir()
	for _, db := range dbs {
		b, err := os.ReadFile(db)
		to := filepath.Join(cp, filepath.Base(jobDir), filepath.Base(filepath.Dir(db)))
		if err != nil || os.MkdirAll(to, 0o700) != nil || os.WriteFile(filepath.Join(to, raftstore.DBFile), b, 0o600) != nil {
			return nil
		}
	}
	st, err := jobstate.ReadStatus("", filepath.Join(cp, filepath.Base(jobDir)))
	if err != nil {
		return nil
	}
	return st
}

// TestCancelRootless: a job without replicas whose front-end was
// SIGKILLed while its agents were stopped (they cannot end their ranks)
// has no root left; cancel fences every node of its recorded node table,
// says per node what it killed, records the job cancelled, and leaves
// nothing of the job running.
func TestCancelRootless(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	killLeft(t, "sleep "+m)
	// The front-end under a subreaper (the agents it leaves stay stopped).
	wrapper := exec.Command(os.Args[0], ftlaunchBin(t), "run", "--state-dir", dir, "--test-nodes", "4", "-n", "8", "sleep", m)
	wrapper.Env = append(os.Environ(), subreaperEnv+"=1")
	_, errb := startJob(t, wrapper)
	waitFor(t, "every rank to run", 30*time.Second, func() bool { return sleeping(t, m) == 8 })
	// The node table in the state log (a copy of its files: the front-end
	// holds them; the copy is what a crash would leave).
	waitFor(t, "the node table in the state log", 30*time.Second, func() bool {
		st := copiedStatus(t, dir)
		return st != nil && st.N == 8 && st.Nodes == 4 && st.Ranks["cleaned up"] == 8
	})
	var frontEnd int
	for _, p := range liveProcesses(t, ftlaunchBin(t)+" run ") {
		if f := strings.Fields(p); f[1] == ftlaunchBin(t) { // not the subreaper's
			frontEnd, _ = strconv.Atoi(f[0])
		}
	}
	agents := liveProcesses(t, ftlaunchBin(t)+" agent ")
	if len(agents) != 4 {
		t.Fatalf("agents: %q", agents)
	}
	// The fault: agents that cannot end their ranks once their root is
	// gone (stopped; cut off would do the same).
	for _, p := range agents {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(frontEnd, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the front-end (pid %d): %v", frontEnd, err)
	}
	waitFor(t, "the front-end's end", 10*time.Second, func() bool { return syscall.Kill(frontEnd, 0) != nil })
	jobs := listJobs(t, dir)
	if len(jobs) != 1 || jobs[0].State != "unfinished" {
		t.Fatalf("jobs after the front-end's death: %+v\n%s", jobs, errb.String())
	}
	id := jobs[0].ID
	if n := sleeping(t, m); n != 8 {
		t.Fatalf("%d ranks left before cancel, want the 8 stopped agents hold", n)
	}

	start := time.Now()
	r := ftlaunch(t, "", "cancel", "--state-dir", dir, id)
	if r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("cancel took %v:\n%s%s", time.Since(start), r.stdout, r.stderr)
	if left := jobProcesses(t, id); len(left) != 0 {
		t.Errorf("processes of job %s left after cancel: %q", id, left)
	}
	if left := liveProcesses(t, ftlaunchBin(t)+" agent "); len(left) != 0 {
		t.Errorf("agents left after cancel: %q", left)
	}
	if n := sleeping(t, m); n != 0 {
		t.Errorf("%d ranks left after cancel", n)
	}
	jobs = listJobs(t, dir)
	if len(jobs) != 1 || jobs[0].State != "cancelled" || jobs[0].ExitCode == nil || *jobs[0].ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("jobs after cancel: %+v", jobs)
	}
	if st := readStatus(t, dir, id); st.UserSignal != "SIGTERM" || len(st.Failures) != 0 || st.Lost != "" {
		t.Errorf("status after cancel: user signal %q, failures %q, lost %q", st.UserSignal, st.Failures, st.Lost)
	}
	if r := ftlaunch(t, "", "status", "--exit-code", "--state-dir", dir, id); r.code == 0 {
		t.Errorf("status --exit-code of a cancelled job exited 0:\n%s", r.stdout)
	}
}

// TestAttachFrontEndAlive: attach to a job whose front-end is alive says
// so in one line and waits; Ctrl-Z detaches (exit 0, the job goes on,
// how to attach again and cancel); attach to a job that ended, a
// successful one included, says how it ended in one line and exits with
// its code.
func TestAttachFrontEndAlive(t *testing.T) {
	dir := t.TempDir()
	m := marker(t)
	cmd, _ := background(t, m, "run", "--state-dir", dir, "--test-nodes", "2", "-n", "2")
	waitFor(t, "every rank to run", 30*time.Second, func() bool { return sleeping(t, m) == 2 })
	att := exec.Command(ftlaunchBin(t), "attach", "--state-dir", dir)
	aerr := &syncBuffer{}
	att.Stderr = aerr
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { att.Process.Kill(); att.Wait() })
	waitFor(t, "attach's line on the live front-end", 30*time.Second, func() bool {
		return strings.Contains(aerr.String(), fmt.Sprintf("its front-end (pid %d on ", cmd.Process.Pid))
	})
	att.Process.Signal(syscall.SIGTSTP)
	if err := att.Wait(); err != nil || !strings.Contains(aerr.String(), "detached") {
		t.Errorf("attach after Ctrl-Z: %v\n%s", err, aerr.String())
	}
	st := readStatus(t, dir, "")
	if st.State != "running" || sleeping(t, m) != 2 {
		t.Fatalf("the job after attach detached: %s, %d rank(s)", st.State, sleeping(t, m))
	}
	if r := ftlaunch(t, "", "cancel", "--state-dir", dir, st.Job); r.code != 0 {
		t.Fatalf("cancel: exit %d\n%s", r.code, r.stderr)
	}
	cmd.Wait()
	r := ftlaunch(t, "", "attach", "--state-dir", dir, st.Job)
	if r.code != 128+int(syscall.SIGTERM) || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "cancelled, exit code 143") {
		t.Errorf("attach on the cancelled job: exit %d\n%s", r.code, r.stderr)
	}
	if r := ftlaunch(t, "", "run", "--state-dir", dir, "--test-nodes", "2", "-n", "2", "true"); r.code != 0 {
		t.Fatalf("run true: exit %d\n%s", r.code, r.stderr)
	}
	if r := ftlaunch(t, "", "attach", "--state-dir", dir); r.code != 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "has ended: finished, exit code 0") {
		t.Errorf("attach on the finished job: exit %d\n%s", r.code, r.stderr)
	}
}

// TestClusterCancelRootless: on the emulated SSH cluster, cancel of a job
// whose front-end (its only root) was SIGKILLed fences every host of its
// node table over SSH, as its agents were started, and records the job
// cancelled.
func TestClusterCancelRootless(t *testing.T) {
	e2eOnly(t, "TestCancelRootless (the same with test nodes, local processes) and TestCancelFencesRootless (launch/jobctl)")
	if testing.Short() {
		t.Skip("an emulated cluster")
	}
	c := chaostest.Cluster(t, 3, cluster.Config{})
	dir := t.TempDir()
	m := marker(t)
	killLeft(t, "sleep "+m)
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--hostfile", hostfile(t, c, 2), "--ssh-config", c.SSHConfig(), "--tree", "flat", "-n", "6", "sleep", m)
	_, errb := startJob(t, cmd)
	waitFor(t, "the node table in the state log", 60*time.Second, func() bool {
		st := copiedStatus(t, dir)
		return st != nil && st.N == 6 && st.Nodes == 3 && st.Ranks["cleaned up"] == 6
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	jobs := listJobs(t, dir)
	if len(jobs) != 1 || jobs[0].State != "unfinished" {
		t.Fatalf("jobs after the front-end's death: %+v\n%s", jobs, errb.String())
	}
	r := ftlaunch(t, "", "cancel", "--state-dir", dir, "--ssh-config", c.SSHConfig(), jobs[0].ID)
	if r.code != 0 || strings.Count(r.stdout, "\nnode ")+boolInt(strings.HasPrefix(r.stdout, "node ")) != 3 || !strings.Contains(r.stderr, "(ssh)") {
		t.Fatalf("cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("cancel:\n%s%s", r.stdout, r.stderr)
	waitGone(t, "sleep "+m, 10*time.Second)
	if jobs := listJobs(t, dir); len(jobs) != 1 || jobs[0].State != "cancelled" {
		t.Errorf("jobs after cancel: %+v", jobs)
	}
}
