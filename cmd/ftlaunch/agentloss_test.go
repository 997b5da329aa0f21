package main

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// runRing starts the ring application with n ranks under policy (and the
// flags where, e.g. test nodes), waits for its node table, and returns the
// command, its output buffers (stderr is logged if the test fails), its
// state directory and the checkpoint directory (its marker).
func runRing(t *testing.T, policy string, n int, where ...string) (cmd *exec.Cmd, out, errb *syncBuffer, dir, ck string) {
	t.Helper()
	return runRingSteps(t, policy, n, ringSteps, where...)
}

// runRingSteps is runRing with a ring of steps steps (10 ms each).
func runRingSteps(t *testing.T, policy string, n int, steps string, where ...string) (cmd *exec.Cmd, out, errb *syncBuffer, dir, ck string) {
	t.Helper()
	dir, ck = t.TempDir(), t.TempDir()
	args := append([]string{"run", "--verbose", "--state-dir", dir, "--restart", policy, "-n", strconv.Itoa(n)}, where...)
	cmd = exec.Command(ftlaunchBin(t), append(args, ringApp(t, steps, ck)...)...)
	out, errb = startJob(t, cmd)
	tablePublished(t, dir)
	if slices.Contains(where, "kary:2") {
		standbyLinksUp(t, dir)
	}
	return cmd, out, errb, dir, ck
}

// standbyLinksUp waits until every agent of a job that has backup parents
// holds its standby link to one (a loss before that loses the agents
// below too, and the test would not see them move).
func standbyLinksUp(t *testing.T, stateDir string) {
	t.Helper()
	waitLive(t, stateDir, "every standby link up", 30*time.Second, func(l *journal.Live) bool { return l.BackupsUp })
}

// startJob starts cmd with its standard output and error in buffers; the
// test's cleanup kills and reaps it, and logs what it wrote if the test
// failed.
func startJob(t *testing.T, cmd *exec.Cmd) (out, errb *syncBuffer) {
	t.Helper()
	out, errb = &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
		}
	})
	return out, errb
}

// killAgent SIGKILLs the agent of node (the parent of its ranks), which
// must not be old, and returns its pid.
func killAgent(t *testing.T, ck, node string, old int) int {
	t.Helper()
	var pid int
	waitFor(t, "the agent of "+node+" with its ranks", 30*time.Second, func() bool {
		pid = agentOf(t, ck, node)
		return pid != old
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the agent of %s (pid %d): %v", node, pid, err)
	}
	return pid
}

// jobSucceeds waits for the job started as cmd to end with exit 0 within
// limit; past it, the job is killed and reaped (before the cleanups, which
// wait for it too) and the test fails.
func jobSucceeds(t *testing.T, cmd *exec.Cmd, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("job: %v", err)
		}
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatal("the job did not end")
	}
}

// shows fails the test for each of wants that text (what: stderr,
// inspect) does not show, and then logs text once.
func shows(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	missed := false
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s does not show %q", what, want)
			missed = true
		}
	}
	if missed {
		t.Logf("%s:\n%s", what, text)
	}
}

// ringApp is the command line of the ring application of steps steps (10
// ms each) with its checkpoints in ck. Done with their steps, its ranks
// wait for the file finishFile(ck) (ringDone makes it), so that the job
// runs until the test has made and checked its faults, however fast the
// steps went.
func ringApp(t *testing.T, steps, ck string, flags ...string) []string {
	return append([]string{ftlaunchBin(t), "ringapp", "--steps", steps, "--step-time", "10ms", "--dir", ck, "--finish-file", finishFile(ck)}, flags...)
}

// finishFile is the file the ring application with checkpoints in ck
// waits for before its end (--finish-file).
func finishFile(ck string) string { return ck + ".finish" }

// ringDone lets the ring application with checkpoints in ck end (its
// finish file), waits for its job and checks its checksum.
func ringDone(t *testing.T, cmd *exec.Cmd, out *syncBuffer, ck string) {
	t.Helper()
	if err := os.WriteFile(finishFile(ck), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	jobSucceeds(t, cmd, 120*time.Second)
	f := strings.Fields(strings.TrimSpace(out.String()))
	if len(f) < 4 || f[0] != "checksum" || f[1] != f[3] {
		t.Fatalf("wrong result: %q", out.String())
	}
}

// TestAgentLostRelaunchRank: the agent of node0, a child of the root with
// agents below it (node2 and node3 under kary:2), is SIGKILLed mid-run
// with its two ranks. Its children move to their backup parent (node1) on
// their own, their ranks untouched; a new incarnation of node0's agent
// starts on the node as a child of the root, and its ranks go through the
// restart protocol on it. Then the new agent is killed too (a second loss
// of the same node's agent, a leaf now): incarnation 3 takes over. The
// result is right, the job exits 0, inspect shows the tree's changes and
// both recoveries with their relaunch phase, nothing is left.
func TestAgentLostRelaunchRank(t *testing.T) {
	e2eOnly(t, "TestRestartRankPlainAgentKilled (a lost agent started again under --restart rank), TestHarnessReparent and TestHarnessAgentRelaunch (launch: an interior agent lost, its children on their backup parent, the agent started again)")
	cmd, out, errb, dir, ck := runRing(t, "rank", 12, "--test-nodes", "6", "--tree", "kary:2")
	old := 0
	for i := range 2 {
		old = killAgent(t, ck, "node0", old)
		recoveries(t, dir, i+1)
	}
	ringDone(t, cmd, out, ck)
	shows(t, "stderr", errb.String(),
		"node node2 moved to its backup parent node1 (node node0 was lost)",
		"node node3 moved to its backup parent node1 (node node0 was lost)",
		"lost the agent of node node0: its link was closed (the agent's process ended, or its host went down); starting its agent again as incarnation 2 (restart 1 of 3) and its rank(s) 0, 1 as their next incarnation",
		"starting its agent again as incarnation 3 (restart 2 of 3)")
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	for ph, n := range map[string]int{"relaunch  ": 2, "the agent of node node0 as incarnation 2": 1, "the agent of node node0 as incarnation 3": 1,
		"respawn   ": 2, "resumed at": 2, "2 resumed": 1, "plan: changed: node node2 moved to its backup parent node1": 1,
		"plan: changed: lost node(s) node0 start again as children of the root": 1} {
		if got := strings.Count(insp.stdout, ph); got < n {
			t.Errorf("inspect shows %q %d times, want %d:\n%s", ph, got, n, insp.stdout)
		}
	}
	// The plan as it stands at the end: node2 and node3 under node1.
	if !regexp.MustCompile(`(?m)^\s+node2\s+\d+\s+node1\s`).MatchString(insp.stdout) || !regexp.MustCompile(`(?m)^\s+node3\s+\d+\s+node1\s`).MatchString(insp.stdout) {
		t.Errorf("inspect's plan does not show node2 and node3 under node1:\n%s", insp.stdout)
	}
	waitGone(t, ck, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}

// TestAgentLostRelaunchJob: under --restart job the lost agent (node1, a
// child of the root with node4 and node5 below it under kary:2) is started
// again, its children having moved to their backup parent, and the whole
// job restarts on the healed tree.
func TestAgentLostRelaunchJob(t *testing.T) {
	if testing.Short() {
		t.Skip("a 12-rank job whose agent is killed")
	}
	cmd, out, _, dir, ck := runRing(t, "job", 12, "--test-nodes", "6", "--tree", "kary:2")
	killAgent(t, ck, "node1", 0)
	recoveries(t, dir, 1)
	ringDone(t, cmd, out, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	shows(t, "inspect", insp.stdout, "relaunch  ", "the agent of node node1 as incarnation 2", "restart-job", "every rank was started again", "plan: changed: node node4 moved to its backup parent node0")
	waitGone(t, ck, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}

// TestAgentLostRelaunchLocal: the one agent of a job on this machine (on
// a socket pair, no launch tree) is lost and spawned again the same way;
// every rank goes through the restart protocol on it.
func TestAgentLostRelaunchLocal(t *testing.T) {
	e2eOnly(t, "TestRestartRankPlainAgentKilled (a lost agent under --restart rank), TestHarnessAgentRelaunch (launch) and recovery.TestRelaunchOrderOfActions")
	if testing.Short() {
		t.Skip("a 3-rank job whose agent is killed")
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	cmd, out, errb, _, ck := runRing(t, "rank", 3)
	killAgent(t, ck, host, 0)
	waitFor(t, "the recovery", 60*time.Second, func() bool {
		return strings.Contains(errb.String(), "recovered: every rank runs again")
	})
	ringDone(t, cmd, out, ck)
	if want := "its rank(s) 0, 1, 2 as their next incarnation"; !strings.Contains(errb.String(), want) {
		t.Errorf("stderr does not say %q", want)
	}
	waitGone(t, ck, 10*time.Second)
}

// TestAgentLostRelaunchFailover: the front-end (the root's leader) is
// SIGKILLed once the relaunch of a lost agent is committed and before it
// starts the agent: the successor carries the recovery on from the
// committed phase, starts the node's next agent incarnation itself (once),
// and the job completes with the right result.
func TestAgentLostRelaunchFailover(t *testing.T) {
	e2eOnly(t, "TestRestartRankFailoverMidRecovery (a successor carries a recovery on) and recovery.TestRestartJobLeaderChange")
	if testing.Short() {
		t.Skip("a replicated job with a failover during a relaunch")
	}
	cmd, errb, dir, ck := startHeld(t, "relaunch", "--test-nodes", "6", "--tree", "flat")
	killAgent(t, ck, "node4", 0) // not a replica agent's node (node0, node1)
	waitFor(t, "the front-end to hold the recovery", 30*time.Second, func() bool {
		return strings.Contains(errb.String(), "test hook: holding the recovery at its committed relaunch phase")
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	attachRight(t, dir, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	// Counted by address: a leadership blip while the front-end led can
	// write a batch of events twice (launch/journal's apply retries).
	addrs := map[string]bool{}
	for _, m := range regexp.MustCompile(`node4\s+up: connected back from (\S+)`).FindAllStringSubmatch(insp.stdout, -1) {
		addrs[m[1]] = true
	}
	if n := len(addrs); n != 2 {
		t.Errorf("node4's agent connected %d time(s), want twice (its first incarnation and the successor's relaunch):\n%s", n, insp.stdout)
	}
	waitGone(t, ck, 10*time.Second)
}

// TestAgentLostPastMaxRestarts: the second loss of a node's agent under
// --max-restarts 1 ends the job, naming why, with nothing left running.
func TestAgentLostPastMaxRestarts(t *testing.T) {
	e2eOnly(t, "recovery.TestRelaunchEnds (--max-restarts for an agent)")
	if testing.Short() {
		t.Skip("an 8-rank job whose agent is killed twice")
	}
	cmd, _, errb, dir, ck := runRing(t, "rank", 8, "--test-nodes", "4", "--tree", "flat", "--max-restarts", "1")
	old := killAgent(t, ck, "node2", 0)
	recoveries(t, dir, 1)
	killAgent(t, ck, "node2", old)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("job: %v, want exit code 1", err)
	}
	// The killed agent's link ends with EOF or, with bytes unread in its
	// socket, a reset: both said in plain words.
	if !regexp.MustCompile(`lost the agent of node node2: its link was (closed|reset) \(the agent's process ended, or its host (went down|restarted)\); its agent was started again 1 time\(s\) \(--max-restarts 1\): the job ends`).MatchString(errb.String()) {
		t.Errorf("stderr does not say that node2's agent was lost past --max-restarts 1")
	}
	waitGone(t, ck, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}

// TestClusterAgentLostRelaunch: over SSH on the emulated cluster, the
// agent of one host is SIGKILLed (its host still answers): a new agent
// incarnation is started there over a new SSH session and its ranks go
// through the restart protocol on it.
func TestClusterAgentLostRelaunch(t *testing.T) {
	e2eOnly(t, "TestRestartRankPlainAgentKilled (the relaunch) and TestClusterLaunch (SSH sessions to the emulated hosts)")
	if testing.Short() {
		t.Skip("an emulated cluster")
	}
	c := chaostest.Cluster(t, 4, cluster.Config{})
	cmd, out, _, dir, ck := runRing(t, "rank", 8, "--hostfile", hostfile(t, c, 2), "--ssh-config", c.SSHConfig(), "--tree", "flat")
	killAgent(t, ck, "node003", 0)
	recoveries(t, dir, 1)
	ringDone(t, cmd, out, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	shows(t, "inspect", insp.stdout, "the agent of node node003 as incarnation 2", "resumed at")
	waitGone(t, ck, 20*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)
}

// TestOrphanFallbacks: an agent whose parent and backup parent are lost
// together moves to its fallback parents (docs/recovery.md): its
// grandparent, else the root; its ranks run on. 20 ranks on 10 test
// nodes under kary:2: root → node0, node1 → node2..5 → node6..9, where
// node6 (under node2) and node9 (under node3) have each other's parent as
// backup. node2 and node3 killed together: node6 and node9 move to their
// grandparent node0. Then the four children of the root killed together:
// the agents below them move to the root. Only the killed agents' ranks
// start again; the checksum is right.
func TestOrphanFallbacks(t *testing.T) {
	e2eOnly(t, "topology.TestRemoveOrphansAndFallbacks (the fallback parents) and TestHarnessReparent, TestHarnessReparentToRoot (launch: orphans move to their backup, or to the root)")
	if testing.Short() {
		t.Skip("a 20-rank job on 10 test nodes, four agents killed")
	}
	cmd, out, errb, dir, ck := runRing(t, "rank", 20, "--test-nodes", "10", "--tree", "kary:2")
	standbyLinksUp(t, dir)
	// killTogether stops the agents first, then kills them: an orphan of
	// the first cannot move to the second before it dies too.
	killTogether := func(nodes ...string) {
		t.Helper()
		pids := make([]int, len(nodes))
		for i, n := range nodes {
			waitFor(t, "the agent of "+n, 30*time.Second, func() bool { pids[i] = agentOf(t, ck, n); return pids[i] != 0 })
		}
		for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
			for i, p := range pids {
				if err := syscall.Kill(p, sig); err != nil {
					t.Fatalf("signal %v to the agent of %s (pid %d): %v", sig, nodes[i], p, err)
				}
			}
		}
	}
	killTogether("node2", "node3")
	recoveries(t, dir, 1)
	shows(t, "stderr", errb.String(),
		"node node6 moved to its fallback parent node0 (node node2 was lost)",
		"node node9 moved to its fallback parent node0 (node node3 was lost)",
		"node node7 moved to its backup parent node4 (node node2 was lost)",
		"node node8 moved to its backup parent node5 (node node3 was lost)")
	// The lost agents started again as children of the root; backups
	// and fallback lists were dealt again before the recovery began.
	// Every child of the root killed together now: the agents below them
	// have their backups on that level too, so each moves to its
	// grandparent, the root (whether or not its new standby link is up).
	killTogether("node0", "node1", "node2", "node3")
	recoveries(t, dir, 2)
	ringDone(t, cmd, out, ck)
	if n := strings.Count(errb.String(), "moved to the root, its last fallback parent"); n < 2 {
		t.Errorf("stderr says %d time(s) that an agent moved to the root, want at least 2", n)
	}
	if strings.Contains(errb.String(), "did not reach a new parent") {
		t.Error("an orphan did not reach a new parent")
	}
	// Only the killed agents' ranks started again: 0-7, never 8-19.
	for _, m := range regexp.MustCompile(`and its rank\(s\) ([0-9, ]+) as their next incarnation`).FindAllStringSubmatch(errb.String(), -1) {
		for _, r := range strings.Split(m[1], ", ") {
			if n, _ := strconv.Atoi(r); n >= 8 {
				t.Errorf("rank %d (not on a killed node) started again: %s", n, m[0])
			}
		}
	}
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	shows(t, "inspect", insp.stdout, "plan: changed: node node6 moved to its fallback parent node0", "moved to the root, its last fallback parent")
	waitGone(t, ck, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}
