package main

import (
	"strings"
	"testing"
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
	// Gone, or a zombie not reaped yet (the front-end that was its
	// parent exited): not stopped, not running.
	if processRunning(pid) {
		t.Errorf("the stopped agent (pid %d) is still there", pid)
	}
}
