package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// A node that goes silent is not tried again: with --spare-nodes, the
// agent of node2 (a leaf child of the root) is SIGSTOPped mid-run; once its
// heartbeats are missed, its agent starts on the spare node4 and its two
// ranks go through the restart protocol there. The result is right, the
// job exits 0, inspect has the ranks on node4, and the stopped agent is
// gone (the root killed its session; its ranks died with it).
func TestSpareNode(t *testing.T) {
	if testing.Short() {
		t.Skip("an 8-rank job that waits out a silent node's heartbeats")
	}
	cmd, out, errb, dir, ck := runRing(t, "rank", 8, "--test-nodes", "5", "--spare-nodes", "1", "--tree", "flat")
	pid := stopAgent(t, ck, "node2")
	recoveries(t, dir, 1)
	ringDone(t, cmd, out, ck)
	// Gossip declares it dead first (its link quiet too), or the link's
	// heartbeat times out.
	for _, want := range []string{"lost the agent of node node2: ",
		"peer silent; starting its agent again on spare node node4 as incarnation 2 (restart 1 of 3) and its rank(s) 4, 5 as their next incarnation"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr does not say %q", want)
		}
	}
	text := ftlaunch(t, "", "inspect", "--state-dir", dir)
	if !strings.Contains(text.stdout, "node4") {
		t.Errorf("inspect does not show node4:\n%s", text.stdout)
	}
	t.Logf("inspect:\n%s", text.stdout)
	// The report agrees with itself: the spare is the root's child and its
	// first start is no restart; the lost node is marked lost; the
	// launch's phases end with the launch, not the spare's start.
	var rep journal.Report
	if r := ftlaunch(t, "", "inspect", "--json", "--state-dir", dir); json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("inspect --json:\n%s%s", r.stdout, r.stderr)
	}
	for _, a := range rep.Agents {
		switch a.Node {
		case "node4":
			if a.Primary != journal.RootName || len(a.RanksRestarted) != 0 || a.Ranks != 2 || a.Lost {
				t.Errorf("spare node4: primary %q, ranks %d, restarted %v, lost %v", a.Primary, a.Ranks, a.RanksRestarted, a.Lost)
			}
		case "node2":
			if !a.Lost || a.Ranks != 0 {
				t.Errorf("lost node2: lost %v, ranks %d", a.Lost, a.Ranks)
			}
		}
	}
	// The fence of the stopped agent's node is in the timeline.
	if !slices.ContainsFunc(rep.Events, func(ev journal.ReportEvent) bool { return ev.Step == journal.StepFence && ev.Node == "node2" }) {
		t.Errorf("no fence of node2 in the timeline")
	}
	if st := readStatus(t, dir, ""); st.Nodes != 4 || rep.Nodes() != 4 {
		t.Errorf("the job is on %d node(s) by status, %d by inspect; want 4 as while it ran", st.Nodes, rep.Nodes())
	}
	for _, p := range rep.Phases {
		if p.Name != "run" && p.StartMS+p.Duration > rep.Recoveries[0].Failure.AtMS {
			t.Errorf("launch phase %q ends at +%.0f ms, after the failure (+%.0f ms)", p.Name, p.StartMS+p.Duration, rep.Recoveries[0].Failure.AtMS)
		}
	}
	// Gone, or a zombie not reaped yet (the front-end that was its
	// parent exited): not stopped, not running.
	if processRunning(pid) {
		t.Errorf("the stopped agent (pid %d) is still there", pid)
	}
}
