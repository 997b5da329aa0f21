package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/launch/fence"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
)

// #14's node losses on the emulated SSH cluster. Long (a partition held
// for three detection times): `make test-recovery`
// (FTLAUNCH_RECOVERY_LONG=1).

// longRecovery skips #14's node-loss runs unless asked for (make
// test-recovery): the default suite keeps within its time.
func longRecovery(t *testing.T) {
	t.Helper()
	if os.Getenv("FTLAUNCH_RECOVERY_LONG") == "" {
		t.Skip("set FTLAUNCH_RECOVERY_LONG=1 (make test-recovery) for the node-loss runs")
	}
}

// TestClusterPartitionSpare: a host cut off from the rest for three
// detection times is declared lost; its ranks start again on the spare
// host; the root's fence over SSH cannot reach it: the cut-off agent
// killed its ranks itself once every upward path was silent for the
// self-fence bound, before the replacements started (the agents' own
// rank times), and the respawn says so (inspect --json: self-fenced).
// When the partition heals the old agent learns from a root replica that
// it was replaced; the result is right and nothing is left.
func TestClusterPartitionSpare(t *testing.T) {
	longRecovery(t)
	c := chaostest.Cluster(t, 8, cluster.Config{})
	hosts := hostfile(t, c, 4)
	dir, ck := t.TempDir(), t.TempDir()
	// 7 hosts x 4 ranks; node008 is the spare. node001 and node002 host
	// the root replicas; node005 is a leaf of the flat tree.
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--hostfile", hosts, "--ssh-config", c.SSHConfig(),
		"--spare-nodes", "1", "--replicas", "3", "--restart", "rank", "--tree", "flat", "--state-dir", dir, "-n", "28",
		ftlaunchBin(t), "ringapp", "--steps", "3000", "--step-time", "10ms", "--dir", ck)
	times := t.TempDir()
	cmd.Env = append(os.Environ(), fence.EnvRankTimes+"="+times)
	out, errb := startJob(t, cmd)
	tablePublished(t, dir)
	replicasJoined(t, dir, 2, 30*time.Second)
	old := ranksOn(t, ck, "node005")
	if len(old) != 4 {
		t.Fatalf("%d ranks on node005, want 4", len(old))
	}
	cut := time.Now()
	if err := c.Partition(context.Background(), "node005"); err != nil {
		t.Fatal(err)
	}
	healed := false
	t.Cleanup(func() {
		if !healed {
			_ = c.Heal(context.Background(), "node005")
		}
	})
	waitFor(t, "the recovery on the spare host", 60*time.Second, func() bool {
		return strings.Contains(errb.String(), "recovered: every rank runs again")
	})
	if !strings.Contains(errb.String(), "on spare node node008") {
		t.Fatalf("node005's agent did not start on the spare node008")
	}
	// Three detection times (5 s each), then the partition heals.
	time.Sleep(time.Until(cut.Add(15 * time.Second))) // the fault's length, not a wait for a condition
	if n := len(ranksOnAlive(old)); n != 0 {
		t.Errorf("%d of the old ranks on node005 still ran while it was cut off (not self-fenced)", n)
	}
	if err := c.Heal(context.Background(), "node005"); err != nil {
		t.Fatal(err)
	}
	healed = true
	heal := time.Now()
	waitFor(t, "the old incarnation's ranks on node005 to go", 10*time.Second, func() bool { return len(ranksOnAlive(old)) == 0 })
	gone := time.Since(heal)
	t.Logf("old ranks on node005 gone %v after the partition healed", gone)
	if gone > 3*time.Second {
		t.Errorf("the returning agent's ranks took %v to go (want about 1 s)", gone)
	}
	ringDone(t, cmd, out, ck)
	waitGone(t, ck, 10*time.Second)
	if !strings.Contains(errb.String(), "lost the agent of node node005") {
		t.Errorf("stderr does not name node005's loss")
	}
	incarnationsApart(t, times, "node005", "node008")
	fencedAs(t, dir, "node005", "self-fenced")
}

// incarnationsApart checks, from the agents' own rank times, that no two
// incarnations of a rank ran at once, and that the ranks of lost (their
// first incarnation) ended, as recorded on that node, before their next
// started on spare.
func incarnationsApart(t *testing.T, dir, lost, spare string) {
	t.Helper()
	rts, err := fence.ReadRankTimes(dir)
	if err != nil {
		t.Fatalf("rank times: %v", err)
	}
	spans := trial.SpansOf(rts)
	if ov := trial.Overlap(spans); ov != "" {
		t.Errorf("incarnations overlap: %s", ov)
	}
	moved := 0
	for _, old := range spans {
		if old.Node != lost || old.Inc != 1 {
			continue
		}
		for _, nw := range spans {
			if nw.Rank != old.Rank || nw.Node != spare || nw.Inc <= old.Inc {
				continue
			}
			moved++
			switch {
			case old.End.IsZero():
				t.Errorf("rank %d: no end recorded on %s (its agent did not see it end)", old.Rank, lost)
			default:
				t.Logf("rank %d: ended on %s %v before incarnation %d started on %s", old.Rank, lost, nw.Start.Sub(old.End).Round(time.Millisecond), nw.Inc, spare)
			}
		}
	}
	if moved == 0 {
		t.Errorf("no rank of %s started again on %s in the rank times", lost, spare)
	}
}

// fencedAs checks that the recovery of node's loss says, at the stage
// that started its ranks again, how its fence was confirmed (inspect
// --json), and returns how long after the failure that stage began.
func fencedAs(t *testing.T, dir, node, how string) time.Duration {
	t.Helper()
	var rep struct {
		Recoveries []struct {
			Node   string `json:"node"`
			Phases []struct {
				Stage    string  `json:"stage"`
				OffsetMS float64 `json:"offset_ms"`
				Fenced   []struct {
					Node string `json:"node"`
					How  string `json:"how"`
				} `json:"fenced"`
			} `json:"phases"`
		} `json:"recoveries"`
	}
	insp := ftlaunch(t, "", "inspect", "--json", "--state-dir", dir)
	if err := json.Unmarshal([]byte(insp.stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v", err)
	}
	for _, r := range rep.Recoveries {
		for _, p := range r.Phases {
			for _, f := range p.Fenced {
				if f.Node == node {
					if f.How != how {
						t.Errorf("the %s phase: node %s %s, want %s", p.Stage, node, f.How, how)
					}
					return time.Duration(p.OffsetMS * float64(time.Millisecond))
				}
			}
		}
	}
	t.Errorf("no recovery phase names how node %s was fenced:\n%s", node, insp.stdout)
	return 0
}

// TestClusterInteriorCrash: #14's acceptance on the emulated SSH cluster:
// 10 hosts of which 2 spares, kary:2, three root replicas, --restart rank,
// 4 ranks a host. The third host (node003: interior under kary:2, not a
// replica's host) crashes mid-run: its link is cut, then everything in it
// is SIGKILLed (no RST ever reaches anyone). Gossip and the root's
// hysteresis declare it lost; the agents below it move to their backup
// parents on the root's word; its ranks start again on the first spare
// (node009) and the job completes with the right result; nothing of the
// job is left on any host.
func TestClusterInteriorCrash(t *testing.T) {
	longRecovery(t)
	c := chaostest.Cluster(t, 10, cluster.Config{})
	hosts := hostfile(t, c, 4)
	dir, ck := t.TempDir(), t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--hostfile", hosts, "--ssh-config", c.SSHConfig(),
		"--spare-nodes", "2", "--replicas", "3", "--restart", "rank", "--tree", "kary:2", "--ppn", "4", "--state-dir", dir, "-n", "32",
		ftlaunchBin(t), "ringapp", "--steps", "2500", "--step-time", "10ms", "--dir", ck)
	times := t.TempDir()
	cmd.Env = append(os.Environ(), fence.EnvRankTimes+"="+times)
	out, errb := startJob(t, cmd)
	tablePublished(t, dir)
	replicasJoined(t, dir, 2, 30*time.Second)
	crashRecovered(t, c, errb, ck, "node003", 4)
	for _, want := range []string{"lost the agent of node node003", "on spare node node009", "moved to its backup parent"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
	ringDone(t, cmd, out, ck)
	waitGone(t, ck, 10*time.Second)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	if !strings.Contains(insp.stdout, "plan: changed: node ") || !strings.Contains(insp.stdout, "1 resumed") {
		t.Errorf("inspect shows no move to a backup parent, or no resumed recovery:\n%s", insp.stdout)
	}
	// The crashed host does not answer its fence: its ranks started
	// again once its silence reached the self-fence bound, not after the
	// fence's 5 s timeout.
	if after := fencedAs(t, dir, "node003", "self-fenced"); after >= launcher.FenceTimeout {
		t.Errorf("node003's ranks started again %v after its loss was declared: the fence's timeout (%v) was waited for", after, launcher.FenceTimeout)
	} else {
		t.Logf("node003's ranks started again %v after its loss was declared", after)
	}
	rts, err := fence.ReadRankTimes(times)
	if err != nil {
		t.Fatalf("rank times: %v", err)
	}
	if ov := trial.Overlap(trial.SpansOf(rts)); ov != "" {
		t.Errorf("incarnations overlap: %s", ov)
	}
}

// TestClusterSlowInterior: 200 ms of delay on everything entering an
// interior host (node001 under kary:2) for the whole run, with the
// default detection profile (gossip probes every 200 ms with a 100 ms
// timeout, tree heartbeats): no agent is declared lost and nothing
// switches; the result is right. Gossip may suspect node001 (its acks come
// late, and memberlist may declare it dead); the root's hysteresis (a
// death counts only if the link is quiet too) keeps it.
func TestClusterSlowInterior(t *testing.T) {
	longRecovery(t)
	c := chaostest.Cluster(t, 8, cluster.Config{})
	hosts := hostfile(t, c, 2)
	slow, err := c.SlowLink(context.Background(), "node001", 200*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Stop() })
	ck := t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--hostfile", hosts, "--ssh-config", c.SSHConfig(),
		"--restart", "rank", "--tree", "kary:2", "-n", "16",
		ftlaunchBin(t), "ringapp", "--steps", "1500", "--step-time", "10ms", "--dir", ck)
	out, errb := startJob(t, cmd)
	ringDone(t, cmd, out, ck)
	for _, bad := range []string{"lost the agent", "recovery:", "moved to its backup parent"} {
		if strings.Contains(errb.String(), bad) {
			t.Errorf("%q with a slow interior link:\n%s", bad, errb.String())
		}
	}
	// Gossip alone may condemn node001 (its acks come 200 ms late, its
	// probe timeout is 100 ms): the root keeps it while its link speaks.
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.Contains(l, "gossip") {
			t.Log(l)
		}
	}
	passed, dropped := slow.Counts()
	t.Logf("slow link into node001: %d packets delayed, %d dropped", passed, dropped)
}

// crashRecovered crashes host node, which runs ranks of the ring marked
// ck, and waits until every rank runs again (the host is revived at the
// test's end).
func crashRecovered(t *testing.T, c *cluster.Cluster, errb *syncBuffer, ck, node string, ranks int) {
	t.Helper()
	if old := ranksOn(t, ck, node); len(old) != ranks {
		t.Fatalf("%d ranks on %s, want %d", len(old), node, ranks)
	}
	crash := time.Now()
	if err := c.Kill(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Revive(context.Background(), node) })
	waitFor(t, "the recovery after the crash of "+node, 60*time.Second, func() bool {
		return strings.Contains(errb.String(), "recovered: every rank runs again")
	})
	t.Logf("every rank resumed %v after the crash", time.Since(crash).Round(time.Millisecond))
}

// ranksOn returns the pids of the ranks (processes with marker in their
// command line) whose environment names node.
func ranksOn(t *testing.T, marker, node string) []int {
	t.Helper()
	var pids []int
	for _, p := range rankProcs(t, marker) {
		if p.env["FTLAUNCH_NODE"] == node {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// ranksOnAlive returns those of pids still running.
func ranksOnAlive(pids []int) []int {
	var alive []int
	for _, pid := range pids {
		if processRunning(pid) {
			alive = append(alive, pid)
		}
	}
	return alive
}

// processRunning reports whether pid is a process that is not a zombie
// (one that ended but was not reaped yet: its parent exited, say).
func processRunning(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	state, _, ok := procStat(pid)
	return ok && state != 'Z'
}

// rankNode returns the node of rank (a process with marker in its command
// line), from its environment.
func rankNode(t *testing.T, marker string, rank int) string {
	t.Helper()
	for _, p := range rankProcs(t, marker) {
		if p.env["FTLAUNCH_RANK"] == strconv.Itoa(rank) && p.env["FTLAUNCH_NODE"] != "" {
			return p.env["FTLAUNCH_NODE"]
		}
	}
	t.Fatalf("no process of rank %d found", rank)
	return ""
}

// TestReplicaHostReplaced: the root group keeps its size. node0 hosts a
// root replica (flat tree, --replicas 3, 7 test nodes of which one spare);
// its agent is SIGSTOPped: declared lost, started again on the spare
// node6, whose replica takes node0's place in the group (node0's voter
// removed first). The job completes with the right result; the state log's
// members are the front-end's replica, node1 and node6, all voters.
func TestReplicaHostReplaced(t *testing.T) {
	longRecovery(t)
	cmd, out, errb, dir, ck := runRing(t, "rank", 12, "--test-nodes", "7", "--spare-nodes", "1", "--tree", "flat", "--replicas", "3")
	replicasJoined(t, dir, 2, 30*time.Second)
	pid := agentOf(t, ck, "node0")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	waitFor(t, "node6's replica in node0's place", 60*time.Second, func() bool {
		return strings.Contains(errb.String(), "root replica of the lost node node0 left the group") &&
			strings.Contains(errb.String(), "root replica on node6 joined the group")
	})
	ringDone(t, cmd, out, ck)
	insp := ftlaunch(t, "", "inspect", "--state-dir", dir)
	m := regexp.MustCompile(`members: (.*)`).FindStringSubmatch(insp.stdout)
	if m == nil || strings.Count(m[1], "(voter") != 3 || !strings.Contains(m[1], "node6 (voter") || strings.Contains(m[1], "node0 (") {
		t.Errorf("the group's members at the end: %v, want three voters, node6 in node0's place:\n%s", m, insp.stdout)
	}
	waitGone(t, ck, 10*time.Second)
}
