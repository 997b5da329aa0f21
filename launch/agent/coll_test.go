package agent

import (
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// Only a rank that exited cleanly strands a collective its node's other
// ranks are in: a failed one is the planner's (a restart policy respawns
// it, and it joins after its roll-back; chaos seed 1887075518865483745
// found a SIGKILLed rank reported stranded between two recoveries), and
// one not started yet (a relaunched agent's) is to be started.
func TestEndedForGood(t *testing.T) {
	a := &Agent{exits: map[int]proto.RankStatus{
		0: {Rank: 0},
		1: {Rank: 1, Signal: 9},
		2: {Rank: 2, Code: 3},
		3: {Rank: 3, Code: 127, Reason: "could not start it again"},
	}}
	for r, want := range []bool{true, false, false, false, false} {
		if got := a.endedForGood(r); got != want {
			t.Errorf("rank %d (%+v): ended for good %v, want %v", r, a.exits[r], got, want)
		}
	}
}
