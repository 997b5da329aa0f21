package main

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobctl"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
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
	// ps tells the agents apart: each names its node.
	for _, node := range []string{"node0", "node1", "node2", "node3"} {
		if len(liveProcesses(t, ftlaunchBin(t)+" agent "+node+" --connect")) != 1 {
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
