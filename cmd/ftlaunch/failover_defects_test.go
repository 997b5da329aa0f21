package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStalledSuccessor is #14 item 6's first defect: after the front-end
// is lost, the replica agent that took over as root stalls for 1.5 s
// (SIGSTOP, then SIGCONT): the other replica may lead meanwhile. The job
// still ends with its final status recorded, exit code 0, and attach
// follows it to the end (before: 2 runs in 3 ended "without a final
// status", the successor's writes refused as "not the raft leader").
// `make test-failover` runs it 20 times.
func TestStalledSuccessor(t *testing.T) {
	e2eOnly(t, "TestRootFailoverDuringRun (a successor takes over and ends the job); make test-failover runs it 20 times")
	if testing.Short() {
		t.Skip("a replicated job that fails over and stalls")
	}
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "go")
	cmd := exec.Command(ftlaunchBin(t), "run", "-l", "--state-dir", dir, "--replicas", "3", "--test-nodes", "6", "--verbose", "-n", "12",
		"sh", "-c", "while [ ! -e "+gate+" ]; do sleep 0.05; done; echo done $FTLAUNCH_RANK")
	killFrontEnd(t, cmd, 2)
	node := successorNode(t, dir)
	pid := agentOf(t, gate, node)
	// The ranks end while the successor is stopped: it learns of their
	// ends, and commits the job's end, after the stall, when the other
	// replica may lead.
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	})
	time.Sleep(1500 * time.Millisecond) // the stall itself, not a wait for a condition
	syscall.Kill(pid, syscall.SIGCONT)
	stopped = false
	r := ftlaunch(t, "", "attach", "--state-dir", dir)
	if r.code != 0 || strings.Count(r.stdout, "] done ") != 12 {
		t.Fatalf("attach after %s stalled: exit %d\nstdout:\n%s\nstderr:\n%s\nsuccessor's log:\n%s", node, r.code, r.stdout, r.stderr, successorLogs(t, dir))
	}
	st := ftlaunch(t, "", "status", "--state-dir", dir)
	if !strings.Contains(st.stdout, "finished, exit code 0") {
		t.Fatalf("status:\n%s%s", st.stdout, st.stderr)
	}
	waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)
}

// TestDoubleRootLoss is #14 item 6's second defect: the front-end is
// killed, then, a second after a replica agent took over, that successor
// too. Two of three voters are gone: no root can ever be elected. The
// root's children must not wait out the adoption bound (30 s) with their
// ranks running unsupervised: they see both roots' processes gone and end
// the job's remains within the detection bound plus 2 s; status then says
// the job is unfinished.
func TestDoubleRootLoss(t *testing.T) {
	e2eOnly(t, "TestRootFailoverDuringRun; make test-failover runs it 20 times")
	if testing.Short() {
		t.Skip("a replicated job that loses two roots")
	}
	dir := t.TempDir()
	m := marker(t)
	// Two nodes, both hosting replicas: the successor has no agent to
	// refill the group with (TestSuccessorRefillsGroup and
	// TestAcceptanceLosses are the cases where it has).
	cmd := exec.Command(ftlaunchBin(t), "run", "-l", "--state-dir", dir, "--replicas", "3", "--test-nodes", "2", "--verbose", "-n", "12",
		"sh", "-c", "while :; do echo tick $FTLAUNCH_RANK; sleep 0.1; done; : "+m)
	killFrontEnd(t, cmd, 2)
	node := successorNode(t, dir)
	time.Sleep(time.Second) // the fault schedule: the successor dies a second after it took over
	pid := agentOf(t, m, node)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The heartbeat's bound is 5 s; the children see the successor's
	// link end at once here (its process died), so 5 s + 2 s is generous.
	took := waitGone(t, m, 7*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 7*time.Second-time.Since(killed)+time.Second)
	t.Logf("every rank gone %v after the successor was killed", took)
	waitFor(t, "status to say the job is unfinished", 10*time.Second, func() bool {
		return strings.Contains(ftlaunch(t, "", "status", "--state-dir", dir).stdout, "unfinished")
	})
	traces, _ := filepath.Glob(filepath.Join(dir, "ft-*", "failover.*.log"))
	var said bool
	for _, tr := range traces {
		b, _ := os.ReadFile(tr)
		said = said || strings.Contains(string(b), "lost its majority")
	}
	if !said {
		t.Errorf("no replica's failover log says the group lost its majority (%v)", traces)
	}
}

// successorNode waits for a replica agent to take over as root of the job
// in dir and returns its node.
func successorNode(t *testing.T, dir string) string {
	t.Helper()
	took := regexp.MustCompile(`node (\S+) took over as root`)
	var node string
	waitFor(t, "a replica agent to take over", 30*time.Second, func() bool {
		logs, _ := filepath.Glob(filepath.Join(dir, "ft-*", "output", "ftlaunch.log"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			if m := took.FindSubmatch(b); m != nil {
				node = string(m[1])
				return true
			}
		}
		return false
	})
	return node
}

// TestDoubleRootLossFiveReplicas: the same double loss under --replicas 5
// and --restart rank is survived: three of five voters are left, a second
// replica agent takes over, finds the first successor's agent gone (its
// address refuses) and starts it again on its node without a replica; the
// ranks it took with it come back through the restart protocol; the job
// completes with the right checksum and its final status.
func TestDoubleRootLossFiveReplicas(t *testing.T) {
	longFailover(t)
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--replicas", "5", "--restart", "rank", "--test-nodes", "8", "--verbose", "-n", "16",
		ftlaunchBin(t), "ringapp", "--steps", "1500", "--step-time", "10ms", "--dir", ck)
	killFrontEnd(t, cmd, 4)
	first := successorNode(t, dir)
	time.Sleep(time.Second) // the fault schedule: the successor dies a second after it took over
	if err := syscall.Kill(agentOf(t, ck, first), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	secondLossSurvived(t, dir, ck, first)
}

// TestSuccessorRefillsGroup: under --replicas 3 the successor that took
// over from a killed front-end asks an agent without a replica to host one
// in the front-end's voter's place: a child of the root (flat), or, under
// kary:2, whose root children host the replicas already, a deeper agent
// outside the successor's subtree. Once it joined, the successor is killed
// too, and the group, three voters again, elects another replica agent,
// which takes over, starts the lost agent again and completes the job with
// the right checksum.
func TestSuccessorRefillsGroup(t *testing.T) {
	longFailover(t)
	for _, tc := range []struct {
		tree string
		deep bool // no child of the root without a replica
	}{{"flat", false}, {"kary:2", true}} {
		t.Run(tc.tree, func(t *testing.T) {
			dir, ck := t.TempDir(), t.TempDir()
			cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--replicas", "3", "--restart", "rank", "--tree", tc.tree, "--test-nodes", "6", "--verbose", "-n", "12",
				ftlaunchBin(t), "ringapp", "--steps", "2000", "--step-time", "10ms", "--dir", ck)
			killFrontEnd(t, cmd, 2)
			first := successorNode(t, dir)
			host := refilled(t, dir)
			if tc.deep {
				// Below the other root child: node2, node3 under node0;
				// node4, node5 under node1.
				other := map[string]string{"node0": "node4 node5", "node1": "node2 node3"}[first]
				if !strings.Contains(other, host) {
					t.Fatalf("the successor on %s refilled the group on %s, not below the other child of the root (%s)", first, host, other)
				}
			}
			if err := syscall.Kill(agentOf(t, ck, first), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			secondLossSurvived(t, dir, ck, first)
		})
	}
}

// refilled waits for the successor root of the job in dir to put a
// replica in the front-end's voter's place, and returns its node.
func refilled(t *testing.T, dir string) string {
	t.Helper()
	var host string
	hosts := regexp.MustCompile(`root group: node (\S+) hosts a replica in place of the lost front-end's`)
	waitFor(t, "a third replica in the front-end's place", 30*time.Second, func() bool {
		log := successorLogs(t, dir)
		m := hosts.FindStringSubmatch(log)
		if m != nil {
			host = m[1]
		}
		return m != nil && strings.Contains(log, "root replica on "+host+" joined the group")
	})
	return host
}

// secondLossSurvived checks a replicated job in dir whose second root (the
// successor on node first) was killed: attach sees it complete with the
// right checksum, status names first's agent as lost and the job as
// finished, and no process of the ring (marker ck) is left.
func secondLossSurvived(t *testing.T, dir, ck, first string) {
	t.Helper()
	r := ftlaunch(t, "", "attach", "--state-dir", dir)
	f := checksumLine(r.stdout)
	if r.code != 0 || len(f) < 4 || f[1] != f[3] {
		t.Fatalf("attach after the second root loss: exit %d\nstdout:\n%s\nstderr:\n%s\nsuccessors' logs:\n%s", r.code, r.stdout, r.stderr, successorLogs(t, dir))
	}
	st := ftlaunch(t, "", "status", "--state-dir", dir)
	if !strings.Contains(st.stdout, "finished, exit code 0") || !strings.Contains(st.stdout, "lost the agent of node "+first) {
		t.Fatalf("status:\n%s%s", st.stdout, st.stderr)
	}
	// Only first's agent was lost: the agents below it moved to their
	// backup parents, which the new root had adopted, in time (issue 27
	// item 4: declared lost 7 s late, and its backup refusing orphans
	// while itself between roots, they were started again too).
	in := ftlaunch(t, "", "inspect", "--state-dir", dir, "--json")
	var job struct {
		Agents []struct {
			Node        string `json:"node"`
			Incarnation uint64 `json:"incarnation"`
		} `json:"agents"`
	}
	if err := json.Unmarshal([]byte(in.stdout), &job); err != nil {
		t.Fatalf("inspect: %v\n%s", err, in.stderr)
	}
	for _, a := range job.Agents {
		if a.Node != first && a.Incarnation != 1 {
			t.Errorf("the agent of %s was started again (incarnation %d): only %s's was lost", a.Node, a.Incarnation, first)
		}
	}
	waitGone(t, ck, 20*time.Second)
}

// longFailover skips the longer failover runs unless asked for (make
// test-failover): the default suite keeps within its time.
func longFailover(t *testing.T) {
	t.Helper()
	if os.Getenv("FTLAUNCH_FAILOVER_LONG") == "" {
		t.Skip("set FTLAUNCH_FAILOVER_LONG=1 (make test-failover) for the longer failover runs")
	}
}

// TestSuccessorUsesSpare: after a failover, a child of the root stopped
// (SIGSTOP) is declared lost by the successor root, which fences its node
// from outside (with its replica agent's spawner) and starts its agent on
// the spare node (the spare list is in the job's record); the job
// completes with the right checksum and the stopped agent is gone.
func TestSuccessorUsesSpare(t *testing.T) {
	longFailover(t)
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--replicas", "3", "--restart", "rank", "--spare-nodes", "1",
		"--tree", "flat", "--test-nodes", "6", "--verbose", "-n", "10",
		ftlaunchBin(t), "ringapp", "--steps", "1500", "--step-time", "10ms", "--dir", ck)
	killFrontEnd(t, cmd, 2)
	successorNode(t, dir)
	waitFor(t, "node3 adopted by the successor", 30*time.Second, func() bool {
		return strings.Contains(successorLogs(t, dir), "adopted node node3")
	})
	pid := agentOf(t, ck, "node3") // no replica: node0 and node1 host them
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	r := ftlaunch(t, "", "attach", "--state-dir", dir)
	f := checksumLine(r.stdout)
	log := successorLogs(t, dir)
	if r.code != 0 || len(f) < 4 || f[1] != f[3] {
		t.Fatalf("attach: exit %d\nstdout:\n%s\nstderr:\n%s\nsuccessor's log:\n%s", r.code, r.stdout, r.stderr, log)
	}
	for _, want := range []string{"starting its agent again on spare node node5", "fenced node node3"} {
		if !strings.Contains(log, want) {
			t.Errorf("the successor's log does not say %q:\n%s", want, log)
		}
	}
	if processRunning(pid) {
		t.Errorf("the stopped agent (pid %d) is still there", pid)
	}
}

// killFrontEnd starts a replicated job as cmd, waits until its replica
// agents (replicas of them) joined the group, and SIGKILLs the front-end.
func killFrontEnd(t *testing.T, cmd *exec.Cmd, replicas int) {
	t.Helper()
	_, errb := startJob(t, cmd)
	waitFor(t, "the replica agents in the group", 60*time.Second, func() bool {
		return strings.Count(errb.String(), "joined the group") == replicas
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

// checksumLine returns the fields of ringapp's last "checksum" line in out
// (nil if none): "checksum GOT expected WANT".
func checksumLine(out string) []string {
	if i := strings.LastIndex(out, "checksum "); i >= 0 {
		return strings.Fields(out[i:])
	}
	return nil
}

// TestAcceptanceLosses is issue 14's first acceptance run as one job:
// --test-nodes 10 --spare-nodes 2 --replicas 3 --restart rank --tree
// kary:2 (node0 and node1 under the root, hosting the replicas; node2 and
// node3 under node0, node4 and node5 under node1, node6 and node7 under
// node2), the ring application. One after the other: a leaf agent
// (node5) is SIGKILLed; an interior agent (node2: its children move to
// their backup parents, which inspect shows); a replica agent (node0: its
// agent starts again and hosts a replica again, three voters); the
// front-end (a replica agent takes over and, the root's children both
// hosting replicas, asks a deeper agent to host one in the front-end's
// voter's place); then that successor. The job completes with the right
// checksum and nothing of it is left.
func TestAcceptanceLosses(t *testing.T) {
	longFailover(t)
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--state-dir", dir, "--test-nodes", "10", "--spare-nodes", "2", "--replicas", "3",
		"--restart", "rank", "--tree", "kary:2", "-n", "16", ftlaunchBin(t), "ringapp", "--steps", "4000", "--step-time", "10ms", "--dir", ck)
	_, errb := startJob(t, cmd)
	replicasJoined(t, dir, 2, 60*time.Second)
	tablePublished(t, dir)
	standbyLinksUp(t, dir)
	recovered := func(what string, n int) {
		t.Helper()
		waitFor(t, what, 60*time.Second, func() bool {
			return strings.Count(errb.String(), "recovered: every rank runs again") == n
		})
	}
	killAgent(t, ck, "node5", 0)
	recovered("the leaf's recovery", 1)
	killAgent(t, ck, "node2", 0)
	recovered("the interior agent's recovery", 2)
	killAgent(t, ck, "node0", 0)
	recovered("the replica agent's recovery", 3)
	waitFor(t, "node0's replica in the group again", 30*time.Second, func() bool {
		return strings.Count(errb.String(), "root replica on node0 joined the group") == 2
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	first := successorNode(t, dir)
	host := refilled(t, dir)
	if host == "node0" || host == "node1" {
		t.Fatalf("the group was refilled on %s, which hosted a replica already", host)
	}
	if err := syscall.Kill(agentOf(t, ck, first), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	secondLossSurvived(t, dir, ck, first)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	shows(t, "inspect", insp.stdout, "plan: changed: node node6 moved to its backup parent", "plan: changed: node node7 moved to its backup parent",
		"the agent of node node5 as incarnation 2", "the agent of node node2 as incarnation 2", "the agent of node node0 as incarnation 2")
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}
