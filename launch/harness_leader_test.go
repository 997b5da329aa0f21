package launch

// A leadership blip at a recovery's commit, on the in-process harness: the
// front-end's replica loses the lead of its root group of three just
// before the recovery's suspend phase is committed (the test hook
// "lose-lead", journal.Config.LoseLeadAt), as a loaded machine made it in
// chaos-interior's 3-replica part (docs/chaos.md).

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/root"
)

// Under --replicas 3 and --restart rank, rank 1's first incarnation exits
// with code 7 once the group is up; the front-end's replica hands its lead
// to a replica agent just before the suspend phase is committed. The
// front-end is deposed, holds its events, and the replica agent that
// leads hands the lead back (it hears from the front-end): the phase's
// commit waits for that, the recovery goes on, rank 1 runs again as
// incarnation 2 and the job completes. Before the fix the commit gave up
// after the writer's bounded wait (Regain: 10 s, here 100 ms) and the job
// ended: "the suspend phase could not be committed to the state log: …
// not the raft leader".
func TestHarnessLeadLostAtCommit(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	opts := recoverOpts("wait:" + release)
	opts.Env = append(opts.Env, victimEnv+"2=late:1") // rank 1 fails once release exists
	opts.Replicas, opts.Verbose = 3, true
	testTiming(&opts)
	t.Setenv("FTLAUNCH_TEST_BREAK_RECOVERY", "lose-lead")
	j := runOnNodes(t, []string{"nodeA", "nodeB", "nodeC"}, 2, opts, func(j *nodesJob) {
		defer os.WriteFile(release, nil, 0o600) // rank 1 fails, the others go on
		_, _ = groupUp(j)                       // the blip needs another voter
	})
	rep := checkCompleted(t, j, 6)
	if len(rep.Recoveries) != 1 || rep.Recoveries[0].Rank != 1 || rep.Recoveries[0].NewIncarnation != 2 {
		t.Errorf("recoveries %+v, want rank 1's, to incarnation 2", rep.Recoveries)
	}
	evs := j.obs.untilEnd()
	lost := count(evs, func(e root.LeadChanged) bool { return !e.Leads })
	back := count(evs, func(e root.LeadChanged) bool { return e.Leads })
	if lost == 0 || back == 0 {
		t.Errorf("the front-end's lead was lost %d time(s) and came back %d time(s), want both (the hook's blip): events %v", lost, back, evs)
	}
	if count[root.Recovered](evs, nil) != 1 || count(evs, func(e root.RankRestarted) bool { return e.Rank == 1 && e.Inc == 2 }) != 1 {
		t.Errorf("events %v", evs)
	}
	if t.Failed() {
		t.Logf("front-end's stderr:\n%s\nagents:\n%s", j.stderr.String(), j.sp.log.String())
	}
}
