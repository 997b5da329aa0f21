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

	"github.com/ftlaunch/ftlaunch/launch/journal"
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
