package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/jobctl"
	"github.com/ftlaunch/ftlaunch/launch/jobstate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// endedJob writes a finished job of 4 ranks on node0 and node1 under
// policy restart, whose end is the failure f (none if f.Message is "").
func endedJob(t *testing.T, dir, id, restart string, f journal.Failure, code int) {
	t.Helper()
	j, err := journal.Open(context.Background(), journal.Config{StateDir: dir, Node: "fe", Solo: true,
		Job: journal.Job{ID: id, Argv: []string{"./app"}, N: 4, Start: time.Now(), Restart: restart, MaxRestarts: 3, Spares: []string{"node4"}}})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"node0", "node1"}
	j.Plan(journal.FlatPlan(nodes))
	for i, n := range nodes {
		j.AgentUp(journal.AgentUp{Node: n, Addr: "10.0.0.1:7000", Connected: time.Now()})
		j.RanksStarted(n, []int{2 * i, 2*i + 1}, []int{10 + i, 20 + i})
	}
	if f.Message != "" {
		j.Failure(f)
	}
	if err := j.Close(context.Background(), code, f.Message); err != nil {
		t.Fatal(err)
	}
}

// TestStatusUserSignal: a job ended by the user's SIGINT is cancelled, not
// failed: no failure, no "not recovered"; status names the policy and
// --exit-code exits with the job's code.
func TestStatusUserSignal(t *testing.T) {
	dir := t.TempDir()
	endedJob(t, dir, "ft-int", "rank", journal.Failure{Rank: raftstore.NoRank, Message: "SIGINT: ending the job"}, 130)
	code, out, _ := run(t, statusCommand, "--json", "--state-dir", dir, "ft-int")
	var st jobstate.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if st.Word() != "cancelled" || st.UserSignal != "SIGINT" || len(st.Failures) != 0 || len(st.NotRecovered) != 0 ||
		st.Restart != "rank" || st.MaxRestarts != 3 || st.Policy() != "restart: rank (max 3), spares: node4" {
		t.Errorf("status: %+v", st)
	}
	if code, out, _ := run(t, statusCommand, "--exit-code", "--state-dir", dir, "ft-int"); code != 130 ||
		!strings.HasPrefix(out, "job ft-int: finished, exit code 130") {
		t.Errorf("status --exit-code: exit %d\n%s", code, out)
	}
	_, out, _ = run(t, inspectCommand, "--state-dir", dir, "ft-int")
	if !strings.Contains(out, "policy   restart: rank (max 3), spares: node4\n") || strings.Contains(out, "not recovered") {
		t.Errorf("inspect:\n%s", out)
	}
}

// TestNoRecoveryDue: under --restart none a rank's failure ends the job;
// no recovery was due, and neither status nor inspect says "not
// recovered". The SVG names the failed node, never "rank -1".
func TestNoRecoveryDue(t *testing.T) {
	dir := t.TempDir()
	endedJob(t, dir, "ft-none", "", journal.Failure{Node: "node1", Rank: raftstore.NoRank, Message: "lost the agent of node node1: its link was closed"}, 1)
	st, err := jobstate.ReadStatus(dir, "ft-none")
	if err != nil || st.Word() != "failed" || st.Restart != "none" || len(st.NotRecovered) != 0 || len(st.Failures) != 1 {
		t.Fatalf("status: %v %+v", err, st)
	}
	_, out, _ := run(t, inspectCommand, "--state-dir", dir, "ft-none")
	if strings.Contains(out, "not recovered") || !strings.Contains(out, "no recovery was due (restart: none)") {
		t.Errorf("inspect:\n%s", out)
	}
	svg := filepath.Join(t.TempDir(), "job.svg")
	if code, _, errs := run(t, inspectCommand, "--svg", svg, "--state-dir", dir, "ft-none"); code != 0 {
		t.Fatalf("--svg: exit %d: %s", code, errs)
	}
	b, _ := os.ReadFile(svg)
	if strings.Contains(string(b), "rank -1") || !strings.Contains(string(b), "node node1") {
		t.Errorf("the SVG names a failed node as a rank:\n%s", b)
	}
}

// TestJobsCommand: jobs lists the state directory newest first, in a
// table and as JSON; an empty one gives [] and the header.
func TestJobsCommand(t *testing.T) {
	dir := t.TempDir()
	if code, out, _ := run(t, jobsCommand, "--json", "--state-dir", dir); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("jobs --json of an empty directory: exit %d %q", code, out)
	}
	endedJob(t, dir, "ft-a", "", journal.Failure{}, 0)
	endedJob(t, dir, "ft-b", "", journal.Failure{Node: "node1", Rank: 1, Message: "rank 1 on node node1 exited with code 3"}, 3)
	code, out, _ := run(t, jobsCommand, "--json", "--state-dir", dir)
	var jobs []jobctl.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || code != 0 || len(jobs) != 2 ||
		jobs[0].ID != "ft-b" || jobs[0].State != "failed" || jobs[1].ID != "ft-a" || jobs[1].State != "finished" {
		t.Errorf("jobs --json: exit %d, %v\n%s", code, err, out)
	}
	code, out, _ = run(t, jobsCommand, "--state-dir", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "JOB ") || !strings.HasPrefix(lines[1], "ft-b  ") {
		t.Errorf("jobs: exit %d\n%s", code, out)
	}
	if code, _, errs := run(t, cancelCommand, "--state-dir", dir, "ft-a"); code != 1 || strings.Count(errs, "\n") != 1 {
		t.Errorf("cancel of a finished job: exit %d\n%s", code, errs)
	}
	if code, _, _ := run(t, killCommand, "--signal", "NOPE", "--state-dir", dir, "ft-a"); code != 2 {
		t.Errorf("kill --signal NOPE: exit %d", code)
	}
}

// TestMaxRestartsNeedsRestart: --max-restarts alone (no recovery to bound)
// is refused, not accepted silently; with --restart it is taken.
func TestMaxRestartsNeedsRestart(t *testing.T) {
	env := func(string) string { return "" }
	if _, err := parseRunFlags([]string{"--max-restarts", "2", "true"}, env); err == nil || !strings.Contains(err.Error(), "--restart") {
		t.Errorf("--max-restarts without --restart: %v", err)
	}
	if f, err := parseRunFlags([]string{"--restart", "rank", "--max-restarts", "2", "true"}, env); err != nil || f.maxRestarts != 2 {
		t.Errorf("--restart rank --max-restarts 2: %v", err)
	}
}

// TestHelpNamesEveryCommand: the usage names the commands a person can
// run, the recovery demo application included.
func TestHelpNamesEveryCommand(t *testing.T) {
	for _, c := range []string{"run", "plan", "inspect", "status", "attach", "jobs", "cancel", "kill", "chaos", "ringapp", "version"} {
		if !strings.Contains(usage, "\n  ftlaunch "+c+" ") {
			t.Errorf("ftlaunch help does not name %q", c)
		}
	}
}
