package root

import "testing"

// TestAgentsUpNow: the live report counts the agents up now: a lost
// agent's handle, replaced by its next incarnation's, is not counted
// with it, and a lost agent not started again is not up.
func TestAgentsUpNow(t *testing.T) {
	lost := &agentHandle{idx: 1, name: "node1", inc: 1, up: true, closed: true}
	again := &agentHandle{idx: 1, name: "node1", inc: 2, up: true}
	starting := &agentHandle{idx: 2, name: "node2", inc: 2} // relaunch under way
	// Four starts (node0, node1 twice, node2): two up.
	agents := []*agentHandle{{idx: 0, name: "node0", inc: 1, up: true}, again, starting}
	if n := agentsUpNow(agents); n != 2 {
		t.Errorf("agents up after node1's relaunch, node2's under way: %d, want 2 (of %d)", n, len(agents))
	}
	agents[1] = lost
	if n := agentsUpNow(agents); n != 1 {
		t.Errorf("agents up with node1 lost: %d, want 1", n)
	}
}
