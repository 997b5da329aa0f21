package main

// Recovery for the programs people run (docs/recovery.md, "What is
// recovered, for which program"): one end-to-end case per kind of program
// — a plain executable under --restart job and under --restart rank, an
// MPICH program under --restart job. The client library's cases are
// agentloss_test.go's and restart_test.go's; every cell of the support
// matrix is recovery's TestSupportMatrix.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shellLoop is a plain executable: steps of 0.1 s, then a "done" line
// naming the rank. $0 is m, which marks its processes.
func shellLoop(steps int, m string) []string {
	return []string{"sh", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do sleep 0.1; done; echo done $FTLAUNCH_RANK`, steps), m}
}

// everyRankRuns waits until n processes of marker run as ranks (their
// shells; a sleep of theirs has no rank of its own).
func everyRankRuns(t *testing.T, m string, n int) []rankProc {
	t.Helper()
	var ranks []rankProc
	waitFor(t, strconv.Itoa(n)+" ranks running", 60*time.Second, func() bool {
		ranks = ranks[:0]
		seen := map[string]bool{}
		for _, p := range rankProcs(t, m) {
			if r := p.env["FTLAUNCH_RANK"]; r != "" && !seen[r] {
				if _, ppid, ok := procStat(p.pid); ok && !strings.Contains(cmdline(ppid), m) { // its parent is its agent, not its shell
					seen[r] = true
					ranks = append(ranks, p)
				}
			}
		}
		return len(ranks) == n
	})
	return ranks
}

// cmdline is a process's command line, "" if it is gone.
func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// doneOnce checks that stdout holds one "done R" line for each of n ranks.
func doneOnce(t *testing.T, stdout string, n int) {
	t.Helper()
	for r := range n {
		if c := strings.Count(stdout, fmt.Sprintf("done %d\n", r)); c != 1 {
			t.Errorf("rank %d's done line printed %d time(s)", r, c)
		}
	}
	if got := strings.Count(stdout, "done "); got != n {
		t.Errorf("%d done lines, want %d:\n%s", got, n, stdout)
	}
}

// TestRestartJobPlainAgentKilled (docs/recovery.md's matrix: plain
// executable × agent SIGKILL × --restart job; the acceptance 1): a
// shell loop of 6 ranks on 3 test nodes, one agent SIGKILLed once every
// rank runs and before any rank called anything (there is no node table,
// ever). The agent starts again on its node, every rank as incarnation 2;
// exit 0, every done line once, nothing left.
func TestRestartJobPlainAgentKilled(t *testing.T) {
	m := "ftl-plain-job-" + marker(t)
	cmd := exec.Command(ftlaunchBin(t), append([]string{"run", "--verbose", "--restart", "job", "--test-nodes", "3", "-n", "6"}, shellLoop(40, m)...)...)
	out, errb := startJob(t, cmd)
	ranks := everyRankRuns(t, m, 6)
	var agent int
	for _, p := range ranks {
		if p.env["FTLAUNCH_NODE"] == "node1" {
			_, agent, _ = procStat(p.pid)
		}
	}
	if agent == 0 {
		t.Fatal("no rank on node1")
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 60*time.Second)
	doneOnce(t, out.String(), 6)
	shows(t, "stderr", errb.String(),
		"lost the agent of node node1: ", "; starting its agent again as incarnation 2 (restart 1 of 3), then restarting the job (restart 1 of 3)",
		"fenced node node1 (incarnation 1)", "recovered: every rank started again")
	// The fence was confirmed before the restart was sent.
	if f, r := strings.Index(errb.String(), "fenced node node1"), strings.Index(errb.String(), "recovery: restarting every rank"); f < 0 || r < f {
		t.Errorf("the job restarted before the fence of node1 was confirmed")
	}
	waitGone(t, m, 10*time.Second)
}

// TestRestartRankPlainRankKilled (plain executable × rank signal ×
// --restart rank, with a replicated root; the acceptance 3): one
// rank of a shell loop SIGKILLed is started again alone, with
// FTLAUNCH_INCARNATION=2; no other rank is stopped. inspect --json shows
// incarnation 2 for it and 1 for every other rank.
func TestRestartRankPlainRankKilled(t *testing.T) {
	m := "ftl-plain-rank-" + marker(t)
	dir := t.TempDir()
	script := `for i in $(seq 1 40); do sleep 0.1; done; echo done $FTLAUNCH_RANK; [ $FTLAUNCH_INCARNATION = 1 ] || echo incarnation $FTLAUNCH_INCARNATION >&2`
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--state-dir", dir, "--restart", "rank", "--test-nodes", "8", "--replicas", "3", "-n", "16", "sh", "-c", script, m)
	out, errb := startJob(t, cmd)
	var victim rankProc
	for _, p := range everyRankRuns(t, m, 16) {
		if p.env["FTLAUNCH_RANK"] == "5" {
			victim = p
		}
	}
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 60*time.Second)
	doneOnce(t, out.String(), 16)
	shows(t, "stderr", errb.String(),
		"rank 5 on node node2 was killed by signal 9 (killed); starting it again alone as incarnation 2 (restart 1 of 3): its program never opened ftlaunch's rank protocol, no other rank is stopped",
		"recovered: rank(s) 5 started again", "incarnation 2")
	if strings.Contains(errb.String(), "suspending") {
		t.Errorf("ranks were suspended")
	}
	var rep struct {
		Ranks []struct {
			Rank        int    `json:"rank"`
			Incarnation uint64 `json:"incarnation"`
		} `json:"ranks"`
	}
	insp := ftlaunch(t, "", "inspect", "--json", "--state-dir", dir)
	if err := json.Unmarshal([]byte(insp.stdout), &rep); err != nil || len(rep.Ranks) != 16 {
		t.Fatalf("inspect --json: %v (%d ranks)\n%s", err, len(rep.Ranks), insp.stdout)
	}
	for _, r := range rep.Ranks {
		if want := map[bool]uint64{true: 2, false: 1}[r.Rank == 5]; r.Incarnation != want {
			t.Errorf("rank %d: incarnation %d, want %d", r.Rank, r.Incarnation, want)
		}
	}
	waitGone(t, m, 10*time.Second)
}

// TestRestartJobMPICHSpare (MPI × silent node × --restart job, a spare; the
// issue's acceptance 2): testdata/mpi_ckpt on 4 test nodes, one of them a
// spare; once the first checkpoint is written, one agent is SIGSTOPped.
// Its node is declared lost after its silence, fenced (the stopped agent
// and its ranks killed), the agent started on the spare, and every rank
// started again from the checkpoint: the checksum is right, exit 0, and
// nothing of the stopped agent is left.
func TestRestartJobMPICHSpare(t *testing.T) {
	e2eOnly(t, "TestRestartJobMPICH (MPI under --restart job), TestSpareNode and TestHarnessSpare (a silent node's agent on the spare)")
	prog := mpiProgram(t, "mpi_ckpt")
	ck := t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--restart", "job", "--test-nodes", "4", "--spare-nodes", "1", "-n", "6", prog, ck, "300", "20")
	out, errb := startJob(t, cmd)
	waitFor(t, "the first checkpoint", 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(ck, "rank-2"))
		return err == nil
	})
	var agent int
	for _, p := range rankProcs(t, prog) {
		if p.env["FTLAUNCH_NODE"] == "node1" {
			_, agent, _ = procStat(p.pid)
		}
	}
	if agent == 0 {
		t.Fatal("no rank on node1")
	}
	t.Cleanup(func() { _ = syscall.Kill(agent, syscall.SIGKILL) }) // in case the fence did not
	if err := syscall.Kill(agent, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 90*time.Second)
	f := strings.Fields(out.String())
	if len(f) < 6 || f[0] != "steps" || f[1] != "300" || f[3] != f[5] {
		t.Fatalf("wrong result: %q", out.String())
	}
	shows(t, "stderr", errb.String(),
		"lost the agent of node node1: ", "starting its agent again on spare node node3 as incarnation 2 (restart 1 of 3), then restarting the job (restart 1 of 3)",
		"fenced node node1 (incarnation 1)", "recovered: every rank started again", "restarted from step")
	if fi, r := strings.Index(errb.String(), "fenced node node1"), strings.Index(errb.String(), "recovery: restarting every rank"); fi < 0 || r < fi {
		t.Errorf("the job restarted before the fence of node1 was confirmed")
	}
	if processRunning(agent) {
		t.Errorf("the stopped agent (pid %d) is still there", agent)
	}
	waitGone(t, prog, 10*time.Second)
}

// TestRestartRankPlainAgentKilled (plain executable × agent SIGKILL ×
// --restart rank): the agent of node1 is SIGKILLed with its two ranks; it
// starts again on its node once its fence is confirmed, and its ranks
// start again alone as incarnation 2 (the others are never stopped); exit
// 0, every done line once, nothing left.
func TestRestartRankPlainAgentKilled(t *testing.T) {
	m := "ftl-plain-rank-agent-" + marker(t)
	cmd := exec.Command(ftlaunchBin(t), append([]string{"run", "--verbose", "--restart", "rank", "--test-nodes", "3", "-n", "6"}, shellLoop(40, m)...)...)
	out, errb := startJob(t, cmd)
	var agent int
	for _, p := range everyRankRuns(t, m, 6) {
		if p.env["FTLAUNCH_NODE"] == "node1" {
			_, agent, _ = procStat(p.pid)
		}
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 60*time.Second)
	doneOnce(t, out.String(), 6)
	shows(t, "stderr", errb.String(),
		"; starting its agent again as incarnation 2 (restart 1 of 3), then its rank(s) 2, 3 alone as their next incarnation: their program never opened ftlaunch's rank protocol, no other rank is stopped",
		"recovered: rank(s) 2, 3 started again")
	if strings.Contains(errb.String(), "suspending") {
		t.Errorf("ranks were suspended")
	}
	if f, r := strings.Index(errb.String(), "fenced node node1"), strings.Index(errb.String(), "recovery: starting rank 2 again"); f < 0 || r < f {
		t.Errorf("rank 2 started again before the fence of node1 was confirmed")
	}
	waitGone(t, m, 10*time.Second)
}
