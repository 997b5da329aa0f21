package main

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// stopAgent SIGSTOPs the agent of node (its node goes silent) and returns
// its pid; the test's cleanup lets it go on and kills it, in case the
// root did not.
func stopAgent(t *testing.T, ck, node string) int {
	t.Helper()
	pid := agentOf(t, ck, node)
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("stop the agent of %s (pid %d): %v", node, pid, err)
	}
	return pid
}

// With no spare node, a silent node's ranks go to a surviving node, as a
// second agent there named host+node: under --oversubscribe, 8 ranks on 4
// test nodes (no free slot: test nodes have none without --ppn), node2's
// agent SIGSTOPped: its ranks resume on node0 (the least loaded, first in
// agent order) as node0+node2. The result is right, the job exits 0, and
// the stopped agent and its old ranks are gone.
func TestSurvivorSlotsOversubscribe(t *testing.T) {
	if testing.Short() {
		t.Skip("a ring job that waits out a silent node's heartbeats")
	}
	survivorTakesOver(t, 8, []string{"--test-nodes", "4", "--tree", "flat", "--oversubscribe"},
		"starting its agent again on node0 (slots shared with the surviving node's 2 rank(s), --oversubscribe; its agent is named node0+node2) as incarnation 2")
}

// The same on free slots: with --ppn 4 --map-by node, 6 ranks on 3 test
// nodes leave 2 free slots on each, and node2's ranks take node0's with
// no --oversubscribe (make test-recovery).
func TestSurvivorSlotsFree(t *testing.T) {
	longRecovery(t)
	survivorTakesOver(t, 6, []string{"--test-nodes", "3", "--tree", "flat", "--ppn", "4", "--map-by", "node"},
		"starting its agent again on node0 (free slots of a surviving node; its agent is named node0+node2) as incarnation 2")
}

// survivorTakesOver runs n ranks of the ring on where, stops node2's
// agent and checks that its ranks resume on node0 as node0+node2, as why
// says.
func survivorTakesOver(t *testing.T, n int, where []string, why string) {
	t.Helper()
	// 9 s of ring: it outlasts the 3 s until the silent node is lost.
	cmd, out, errb, dir, ck := runRingSteps(t, "rank", n, "900", where...)
	pid := stopAgent(t, ck, "node2")
	recoveries(t, dir, 1)
	if guest := agentOf(t, ck, "node0+node2"); guest == pid {
		t.Errorf("the ranks of node0+node2 run under the stopped agent (pid %d)", pid)
	}
	ringDone(t, cmd, out, ck)
	for _, want := range []string{"lost the agent of node node2: ", why,
		"recovery: starting the agent of node node2 on surviving node node0, as node node0+node2, as incarnation 2"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
	if insp := ftlaunch(t, "", "inspect", "--state-dir", dir); !strings.Contains(insp.stdout, "node0+node2") {
		t.Errorf("inspect does not show node0+node2:\n%s", insp.stdout)
	}
	waitGone(t, ck, 10*time.Second)
	if processRunning(pid) {
		t.Errorf("the stopped agent (pid %d) is still there", pid)
	}
}

// Without --oversubscribe, no spare and no free slot (test nodes without
// --ppn have none), a silent node ends the job, naming why; nothing is
// left running, the stopped agent included.
func TestSurvivorSlotsNone(t *testing.T) {
	e2eOnly(t, "recovery.TestRelaunchSurvivorSlots (no spare, no slot: the job ends)")
	if testing.Short() {
		t.Skip("a ring job that waits out a silent node's heartbeats")
	}
	cmd, _, errb, _, ck := runRing(t, "rank", 8, "--test-nodes", "4", "--tree", "flat")
	pid := stopAgent(t, ck, "node2")
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("job: %v, want exit code 1", err)
	}
	want := "its node went silent, a silent node is not tried again, no spare node is left (--spare-nodes), and no surviving node has 2 free slot(s) (--oversubscribe lets ranks share one): the job ends"
	if !strings.Contains(errb.String(), "lost the agent of node node2: ") || !strings.Contains(errb.String(), want) {
		t.Errorf("stderr does not say %q", want)
	}
	waitGone(t, ck, 10*time.Second)
	if processRunning(pid) {
		t.Errorf("the stopped agent (pid %d) is still there", pid)
	}
}

// TestClusterSurvivorSlots: over SSH on the emulated cluster, 4 hosts of 4
// slots each, 2 ranks a host (--ppn 2), no spare: node003 crashes mid-run
// (its link cut, everything in it killed). Its two ranks resume on
// node001's free slots, under a second agent there (node001+node003)
// started over a new SSH session to node001; the result is right and
// nothing of the job is left (make test-recovery).
func TestClusterSurvivorSlots(t *testing.T) {
	longRecovery(t)
	c := chaostest.Cluster(t, 4, cluster.Config{})
	cmd, out, errb, dir, ck := runRingSteps(t, "rank", 8, "1500", "--hostfile", hostfile(t, c, 4), "--ssh-config", c.SSHConfig(),
		"--ppn", "2", "--tree", "flat")
	crashRecovered(t, c, errb, ck, "node003", 2)
	if n := len(ranksOn(t, ck, "node001+node003")); n != 2 {
		t.Errorf("%d ranks run as node001+node003, want 2", n)
	}
	ringDone(t, cmd, out, ck)
	for _, want := range []string{"lost the agent of node node003",
		"starting its agent again on node001 (free slots of a surviving node; its agent is named node001+node003) as incarnation 2"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
	// On node001: the new agent connected back from node001's address.
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	if !regexp.MustCompile(`node001\+node003\s+up: connected back from ` + regexp.QuoteMeta(nodes[0].Addr.String()) + `:`).MatchString(insp.stdout) {
		t.Errorf("inspect does not show node001+node003 connected back from node001 (%s):\n%s", nodes[0].Addr, insp.stdout)
	}
	waitGone(t, ck, 10*time.Second)
}
