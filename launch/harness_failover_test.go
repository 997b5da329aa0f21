package launch

// A failover on the in-process harness: the front-end vanishes
// (root.Options.Vanish: its sockets close as a SIGKILL's would), a replica
// agent's successor root takes over and the job completes under it.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/launch/root"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Under --replicas 3 (the front-end and the replica agents of nodeA and
// nodeB) the front-end is lost once the group is up and every rank holds
// the node table: a replica agent that is a child of the root takes over,
// adopts every agent, the ranks go on (their allgather, after the test's
// word, is answered by the successor), and the successor commits the
// job's end.
func TestHarnessFailover(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	release := filepath.Join(t.TempDir(), "release")
	opts := recoverOpts("wait:" + release)
	opts.Replicas, opts.Verbose = 3, true
	testTiming(&opts)
	vanish := make(chan struct{})
	opts.Vanish = vanish
	var successor string
	var adopted []string
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		defer os.WriteFile(release, nil, 0o600) // the ranks go on, whatever happened
		if _, err := groupUp(j); err != nil {
			return
		}
		close(vanish)
		ev, err := j.obs.wait(j.ctx, is[root.FailoverDone](nil))
		if err != nil {
			return
		}
		successor = ev.(root.FailoverDone).Node
		for _, h := range hosts {
			if _, err := j.obs.wait(j.ctx, is(func(e root.Adopted) bool { return e.Node == h })); err != nil {
				return
			}
			adopted = append(adopted, h)
		}
	})
	if j.err != nil || j.res.ExitCode != root.ExitLauncher {
		t.Fatalf("the front-end: exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	evs := j.obs.untilEnd()
	if successor != "nodeA" && successor != "nodeB" || len(adopted) != len(hosts) {
		t.Fatalf("successor %q, adopted %v; events %v; front-end:\n%s\nagents:\n%s", successor, adopted, evs, j.stderr.String(), j.sp.log.String())
	}
	st := j.state
	if st.Leader != successor || !st.Status.Done || st.Status.ExitCode != 0 || len(st.Ranks) != 6 {
		t.Fatalf("state log: leader %q, status %+v, %d ranks; agents:\n%s", st.Leader, st.Status, len(st.Ranks), j.sp.log.String())
	}
	for _, r := range st.Ranks {
		if r.State != raftstore.RankExited || r.ExitCode != 0 || r.Incarnation != 1 {
			t.Errorf("rank %+v", r)
		}
	}
	if rep := journal.Analyze(st); len(rep.Invariants) > 0 || len(rep.Recoveries) > 0 {
		t.Errorf("invariants %v, recoveries %+v", rep.Invariants, rep.Recoveries)
	}
	if count[root.AgentLost](evs, nil) != 0 || count[root.AgentRelaunched](evs, nil) != 0 {
		t.Errorf("events %v", evs)
	}
	// The ranks' output after the takeover went to the successor's files
	// (the job's directory's output/).
	for r := range 6 {
		outs, _ := filepath.Glob(filepath.Join(j.stateDir, "ft-*", "output", fmt.Sprintf("rank.%d.out", r)))
		var all strings.Builder
		for _, o := range outs {
			b, _ := os.ReadFile(o)
			all.Write(b)
		}
		if want := fmt.Sprintf("rank%d incarnation 1 sum %d\n", r, sumOf(6)); !strings.Contains(all.String(), want) {
			t.Errorf("rank %d's output %v: %q, want %q", r, outs, all.String(), want)
		}
	}
	if t.Failed() {
		logs, _ := filepath.Glob(filepath.Join(j.stateDir, "ft-*", "output", "*"))
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, b)
		}
		t.Logf("front-end's stdout:\n%s\nstderr:\n%s\nagents:\n%s", j.stdout.String(), j.stderr.String(), j.sp.log.String())
	}
	noRankLeft(t, st)
}

// groupUp waits until every rank holds the node table and two replica
// agents joined the root group, and returns the first that joined.
func groupUp(j *nodesJob) (root.ReplicaJoined, error) {
	if _, err := j.obs.wait(j.ctx, is[root.TablePublished](nil)); err != nil {
		return root.ReplicaJoined{}, err
	}
	first, err := j.obs.wait(j.ctx, is[root.ReplicaJoined](nil))
	if err != nil {
		return root.ReplicaJoined{}, err
	}
	_, err = j.obs.wait(j.ctx, is(func(e root.ReplicaJoined) bool { return e != first }))
	return first.(root.ReplicaJoined), err
}

// A successor whose replicated state lacks the node table (the front-end
// was lost between the table's answer and its commit: TestClusterRaftCut-
// FrontEnd's cut came there) learns it from the agents' resync
// (MTableHeld), so that a rank that fails under it is recovered by the
// restart protocol, not started again alone as a program that never
// published (which left every other rank waiting in its allgather and the
// restarted rank in its Publish). The front-end does not record the table
// (the "no-table-record" test hook), vanishes once the group is up; after
// every agent is adopted, rank 1 exits with code 7; the job completes with
// one recovery of rank 1.
func TestHarnessSuccessorLearnsTable(t *testing.T) {
	t.Setenv("FTLAUNCH_TEST_BREAK_RECOVERY", "no-table-record")
	hosts := []string{"nodeA", "nodeB", "nodeC"}
	release := filepath.Join(t.TempDir(), "release")
	opts := recoverOpts("wait:" + release)
	opts.Env = append(opts.Env, victimEnv+"2=late:1")
	opts.Replicas, opts.Verbose = 3, true
	testTiming(&opts)
	vanish := make(chan struct{})
	opts.Vanish = vanish
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		defer os.WriteFile(release, nil, 0o600) // the ranks go on, whatever happened
		if _, err := groupUp(j); err != nil {
			return
		}
		close(vanish)
		if _, err := j.obs.wait(j.ctx, is[root.FailoverDone](nil)); err != nil {
			return
		}
		for _, h := range hosts {
			if _, err := j.obs.wait(j.ctx, is(func(e root.Adopted) bool { return e.Node == h })); err != nil {
				return
			}
		}
	})
	if j.err != nil || j.res.ExitCode != root.ExitLauncher {
		t.Fatalf("the front-end: exit %d, %v; stderr %s", j.res.ExitCode, j.err, j.stderr.String())
	}
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 0 || len(st.Ranks) != 6 {
		t.Fatalf("state log: status %+v, %d ranks; agents:\n%s", st.Status, len(st.Ranks), j.sp.log.String())
	}
	for _, r := range st.Ranks {
		if want := uint64(1) + uint64(boolInt(r.Rank == 1)); r.State != raftstore.RankExited || r.ExitCode != 0 || r.Incarnation != want {
			t.Errorf("rank %+v, want incarnation %d exited 0", r, want)
		}
		if r.ITuple == nil {
			t.Errorf("rank %d: no node-table row in the state log (the successor did not record the table it learnt)", r.Rank)
		}
	}
	rep := journal.Analyze(st)
	if len(rep.Invariants) > 0 || len(rep.Recoveries) != 1 || rep.Recoveries[0].Rank != 1 || rep.Recoveries[0].NewIncarnation != 2 {
		t.Errorf("invariants %v, recoveries %+v; agents:\n%s", rep.Invariants, rep.Recoveries, j.sp.log.String())
	}
}

// A successor root finishes a ring its predecessor had open: on kary:2
// over five nodes of two ranks under --replicas 3, every rank but the
// last is in the ring exchange when the front-end vanishes; the agents
// send their parts (a scan's: runs and their ends) again to the
// successor, the last rank enters after every root child was adopted, and
// every rank gets its neighbours' values.
func TestHarnessSuccessorFinishesRing(t *testing.T) {
	hosts := []string{"nodeA", "nodeB", "nodeC", "nodeD", "nodeE"}
	n := 2 * len(hosts)
	inRing, release := t.TempDir(), filepath.Join(t.TempDir(), "release")
	opts := Options{Env: []string{rankRoleEnv + "=ringhold", inRingEnv + "=" + inRing, gateEnv + "=" + release}, Label: true, Tree: "kary:2"}
	opts.Replicas = 3
	testTiming(&opts)
	vanish := make(chan struct{})
	opts.Vanish = vanish
	j := runOnNodes(t, hosts, 2, opts, func(j *nodesJob) {
		defer os.WriteFile(release, nil, 0o600) // the last rank goes on, whatever happened
		if _, err := groupUp(j); err != nil {
			return
		}
		for j.ctx.Err() == nil {
			if es, _ := os.ReadDir(inRing); len(es) == n-1 {
				break
			}
			time.Sleep(20 * time.Millisecond) // polling the ranks' word
		}
		// Their calls reached their agents, and their parts the front-end:
		// nodeA's, which covers nodeA, nodeC and nodeD (nodeB waits for
		// nodeE, whose last rank is out).
		if err := j.sp.joins.waitAll(j.ctx, rankproto.OpRing, "nodeA", "nodeB", "nodeC", "nodeD"); err != nil {
			return
		}
		if _, err := j.obs.wait(j.ctx, is(func(e root.CollectiveWaits) bool { return e.Kind == "ring" && e.Covered == 3 })); err != nil {
			return
		}
		close(vanish)
		if _, err := j.obs.wait(j.ctx, is[root.FailoverDone](nil)); err != nil {
			return
		}
		for _, h := range []string{"nodeA", "nodeB"} {
			if _, err := j.obs.wait(j.ctx, is(func(e root.Adopted) bool { return e.Node == h })); err != nil {
				return
			}
		}
	})
	st := j.state
	if !st.Status.Done || st.Status.ExitCode != 0 {
		t.Fatalf("state log: status %+v; front-end:\n%s\nagents:\n%s", st.Status, j.stderr.String(), j.sp.log.String())
	}
	var all strings.Builder
	outs, _ := filepath.Glob(filepath.Join(j.stateDir, "ft-*", "output", "rank.*.out"))
	for _, o := range outs {
		b, _ := os.ReadFile(o)
		all.Write(b)
	}
	all.WriteString(j.stdout.String())
	for r := range n {
		if want := fmt.Sprintf("rank%d ring rank%d rank%d\n", r, (r-1+n)%n, (r+1)%n); !strings.Contains(all.String(), want) {
			t.Errorf("rank %d's output lacks %q: %q", r, want, all.String())
		}
	}
	noRankLeft(t, st)
}
