package recovery

import (
	"testing"
	"time"
)

// TestReasonWords: the user's words for each of the planner's typed
// reasons, as stderr, the state log and the end-to-end tests read them
// (the sentences the planner wrote itself before its reasons were typed).
func TestReasonWords(t *testing.T) {
	for _, c := range []struct {
		why  Reason
		want string
	}{
		{Reason{Kind: ReasonRankEnded, Rank: 1, Node: "n0", Code: 3, Text: "exited with code 3"}, "rank 1 on node n0 exited with code 3"},
		{Reason{Kind: ReasonRankEnded, Rank: 2, Node: "n1", Signal: 9, Text: "was killed by signal 9 (killed)"}, "rank 2 on node n1 was killed by signal 9 (killed)"},
		{Reason{Kind: ReasonRankEnded, Rank: 0, Node: "n0", Code: 127, Text: "failed to start: no such file"}, "rank 0 on node n0 failed to start: no such file"},
		{Reason{Kind: ReasonEndedTwice, Rank: 1, Node: "n0"}, "protocol error from the agent of node n0: exit message for rank 1: it had ended"},
		{Reason{Kind: ReasonNoSuchRank, Rank: 7, Node: "n0"}, "protocol error from the agent of node n0: exit message for rank 7: no such rank"},
		{Reason{Kind: ReasonRankAbort, Rank: 1, Node: "n0", Code: 5, Text: "bad input"}, "rank 1 on node n0 called Abort(5): bad input"},
		{Reason{Kind: ReasonRankAbort, Rank: 1, Node: "n0", Code: 258}, "rank 1 on node n0 called Abort(258)"},
		{Reason{Kind: ReasonRankBroke, Rank: 3, Node: "n1", Text: "broke the PMI protocol"}, "rank 3 on node n1 broke the PMI protocol"},
		{Reason{Kind: ReasonLaunch, Node: "n2", Text: "ssh n2: connection refused"}, "ssh n2: connection refused"},
		{Reason{Kind: ReasonProtocol, Node: "n1", Text: "unknown message type 99"}, "protocol error from the agent of node n1: unknown message type 99"},
		{Reason{Kind: ReasonMismatch, Node: "n1", Seq: 4, Op: "barrier", Want: "allgather"}, "collective 4: node n1 called barrier while others called allgather"},
		{Reason{Kind: ReasonStranded, Node: "n3", Seq: 2, Op: "barrier"}, "the ranks of node n3 ended without joining collective 2 (barrier) that other ranks are waiting in"},
		{Reason{Kind: ReasonTimeout, Limit: 90 * time.Second}, "the job exceeded --timeout 1m30s; terminating it"},
		{Reason{Kind: ReasonSignal, Signal: 2, Limit: 5 * time.Second}, "SIGINT: ending the job (SIGINT to every rank, then SIGTERM, SIGKILL after 5s; SIGINT again kills at once)"},
		{Reason{Kind: ReasonSignal, Signal: 15, Limit: 5 * time.Second, Text: "ann"}, "SIGTERM from ann: ending the job (SIGTERM to every rank, SIGKILL after 5s)"},
		{Reason{Kind: ReasonSignal, Signal: 9, Text: "ann"}, "SIGKILL from ann: ending the job (SIGKILL to every rank)"},
		{Reason{Kind: ReasonCancel, Signal: 15, Limit: 5 * time.Second, Text: "ann"}, "job cancelled by ann: ending the job (SIGTERM to every rank, SIGKILL after 5s)"},
		{Reason{Kind: ReasonSignalRank, Rank: 3, Signal: 10}, "rank 3 was ended by the user's SIGUSR1: ending the job"},
		{Reason{Kind: ReasonPMIUnderRank, Rank: 1, Node: "n0"}, "rank 1 on node n0 speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job"},
		{Reason{Kind: ReasonAgentLost, Node: "n1", Text: "EOF"}, "lost the agent of node n1: EOF"},
		{Reason{Kind: ReasonAgentLost, Node: "n4", With: "n1"}, "lost the agent of node n4: lost with n1 above it in the launch tree"},
		{Reason{Kind: ReasonRankRestart, Rank: 1, Node: "n0", Text: "was killed by signal 9 (killed)", Incarnation: 2, Restarts: 1, Max: 3, Alone: true},
			"rank 1 on node n0 was killed by signal 9 (killed); starting it again alone as incarnation 2 (restart 1 of 3): its program never opened ftlaunch's rank protocol, no other rank is stopped"},
		{Reason{Kind: ReasonRankRestart, Rank: 1, Node: "n", Text: "exited with code 3", Incarnation: 2, Restarts: 1, Max: 3},
			"rank 1 on node n exited with code 3; restarting it as incarnation 2 (restart 1 of 3)"},
		{Reason{Kind: ReasonJobRestart, Rank: 1, Node: "n", Text: "was killed by signal 9 (killed)", Restarts: 1, Max: 1},
			"rank 1 on node n was killed by signal 9 (killed); restarting the job (restart 1 of 1)"},
		{Reason{Kind: ReasonRestartLimit, Rank: 1, Node: "n", Text: "exited with code 4", Restarts: 1, Max: 1,
			History: []Ended{{Incarnation: 1, How: "exited with code 3"}, {Incarnation: 2, How: "exited with code 4"}}},
			"rank 1 on node n exited with code 4; it was restarted 1 time(s) (--max-restarts 1): incarnation 1 exited with code 3, incarnation 2 exited with code 4"},
		{Reason{Kind: ReasonRestartLimit, Rank: 1, Node: "n", Text: "exited with code 3", Restarts: 1, Max: 1, JobWide: true,
			History: []Ended{{Incarnation: 1, How: "exited with code 3"}}},
			"rank 1 on node n exited with code 3; the job was restarted 1 time(s) (--max-restarts 1): incarnation 1 exited with code 3"},
		{Reason{Kind: ReasonNoTable, Rank: 0, Node: "n0", Text: "exited with code 3"},
			"rank 0 on node n0 exited with code 3 before every rank held the node table; its program opened ftlaunch's rank protocol (the client library), whose ranks are replaced under --restart rank only once that table exists (every rank called Publish): the job ends"},
		{Reason{Kind: ReasonAgentNoTable, Node: "n1", Text: "EOF"},
			"lost the agent of node n1: EOF; it was lost before every rank held the node table; its program opened ftlaunch's rank protocol (the client library), whose ranks are replaced under --restart rank only once that table exists (every rank called Publish): the job ends"},
		{Reason{Kind: ReasonAgentNoPlace, Node: "n2", Text: "silent", Place: Place{Kind: PlaceNoSlots, Need: 2}},
			"lost the agent of node n2: silent; its node went silent, a silent node is not tried again, no spare node is left (--spare-nodes), and no surviving node has 2 free slot(s) (--oversubscribe lets ranks share one): the job ends"},
		{Reason{Kind: ReasonAgentNoPlace, Node: "n2", Text: "silent", Place: Place{Kind: PlaceNoHost}},
			"lost the agent of node n2: silent; its node went silent, a silent node is not tried again, no spare node is left (--spare-nodes), and no surviving node is left to share its slots: the job ends"},
		{Reason{Kind: ReasonAgentLimit, Node: "n1", Text: "EOF", Restarts: 3, Max: 3},
			"lost the agent of node n1: EOF; its agent was started again 3 time(s) (--max-restarts 3): the job ends"},
		{Reason{Kind: ReasonAgentJobLimit, Node: "n1", Text: "EOF", Restarts: 1, Max: 1},
			"lost the agent of node n1: EOF; the job was restarted 1 time(s) (--max-restarts 1)"},
		{Reason{Kind: ReasonAgentRankLimit, Node: "n1", Text: "EOF", Rank: 2, Restarts: 1, Max: 1,
			History: []Ended{{Incarnation: 1, How: "exited with code 3"}, {Incarnation: 2}}},
			"lost the agent of node n1: EOF; its rank 2 was restarted 1 time(s) (--max-restarts 1): incarnation 1 exited with code 3, incarnation 2 lost with its agent"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n1", Text: "EOF", Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{2, 3}},
			"lost the agent of node n1: EOF; starting its agent again as incarnation 2 (restart 1 of 3) and its rank(s) 2, 3 as their next incarnation"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n1", Text: "EOF", Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{2, 3}, Alone: true},
			"lost the agent of node n1: EOF; starting its agent again as incarnation 2 (restart 1 of 3), then its rank(s) 2, 3 alone as their next incarnation: their program never opened ftlaunch's rank protocol, no other rank is stopped"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n1", Text: "heartbeat timeout", Incarnation: 2, Restarts: 1, Max: 1, Place: Place{Kind: PlaceSpare, Node: "s0"}, JobRestarts: 1, Decided: true},
			"lost the agent of node n1: heartbeat timeout; starting its agent again on spare node s0 as incarnation 2 (restart 1 of 1), then restarting the job (restart 1 of 1, decided already)"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n1", Text: "EOF", Incarnation: 2, Restarts: 1, Max: 2, JobRestarts: 1},
			"lost the agent of node n1: EOF; starting its agent again as incarnation 2 (restart 1 of 2), then restarting the job (restart 1 of 2)"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n3", Text: "silent", Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{6}, Place: Place{Kind: PlaceFreeSlots, Node: "n0+n3", Host: "n0"}},
			"lost the agent of node n3: silent; starting its agent again on n0 (free slots of a surviving node; its agent is named n0+n3) as incarnation 2 (restart 1 of 3) and its rank(s) 6 as their next incarnation"},
		{Reason{Kind: ReasonAgentRelaunch, Node: "n2", Text: "heartbeat timeout", Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{4, 5}, Place: Place{Kind: PlaceShared, Node: "n0+n2", Host: "n0", Load: 4}},
			"lost the agent of node n2: heartbeat timeout; starting its agent again on n0 (slots shared with the surviving node's 4 rank(s), --oversubscribe; its agent is named n0+n2) as incarnation 2 (restart 1 of 3) and its rank(s) 4, 5 as their next incarnation"},
		{Reason{Kind: ReasonRelaunchFailed, Node: "n1", Incarnation: 2, Text: "ssh: connection refused"},
			"could not start the agent of node n1 again (incarnation 2): ssh: connection refused: the job ends"},
		{Reason{Kind: ReasonExpired, Epoch: 1, Stage: StageSuspend, Limit: 2 * time.Second, Awaited: []Awaited{{Rank: NoRank, Agent: 1}}},
			"recovery (epoch 1) stopped at its suspend stage: no answer within 2s from agent 1"},
		{Reason{Kind: ReasonExpired, Epoch: 3, Stage: StageRelaunch, Limit: time.Second, Awaited: []Awaited{{Rank: NoRank, Agent: NoAgent, Node: "n1"},
			{Rank: NoRank, Agent: NoAgent, Node: "n1", Incarnation: 1}, {Rank: 4, Agent: NoAgent}}},
			"recovery (epoch 3) stopped at its relaunch stage: no answer within 1s from the agent of node n1, the fence of node n1 (incarnation 1), rank 4"},
	} {
		if got := c.why.Words(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.why, got, c.want)
		}
	}
}

// TestRefuseReasonWords: why an adoption was refused, in the words the
// root says (--verbose); the refusals whose words name the root's own
// view of the agent have none here.
func TestRefuseReasonWords(t *testing.T) {
	for why, want := range map[RefuseReason]string{
		RefuseNoRecovery:   "the job does not recover from lost agents",
		RefuseDeclaredLost: "it was declared lost",
		RefuseNotUp:        "it is not up",
		RefuseEnding:       "the job is ending",
		RefuseUnknown:      "",
		RefuseTaken:        "",
	} {
		if got := why.Words(); got != want {
			t.Errorf("RefuseReason(%d).Words() = %q, want %q", why, got, want)
		}
	}
}

// TestFailedRanksSaysEachFailure: the job's end lists the ranks that
// failed, by rank, once more than one did.
func TestFailedRanksSaysEachFailure(t *testing.T) {
	one := []RankExited{{Rank: 3, Node: "n1", Code: 2}}
	if w := FailedRanks(one); w != "" {
		t.Errorf("one failure listed: %q", w)
	}
	two := append(one, RankExited{Rank: 1, Node: "n0", Signal: 9})
	want := "ftlaunch: 2 ranks failed:\n" +
		"  rank 1      node n0               " + two[1].Describe() + "\n" +
		"  rank 3      node n1               " + one[0].Describe() + "\n"
	if w := FailedRanks(two); w != want {
		t.Errorf("words %q, want %q", w, want)
	}
}

// TestStandbyWordsNamesTheLinksNotUp: the launch tree's summary says how
// many standby links were up and names the others, by their agents.
func TestStandbyWordsNamesTheLinksNotUp(t *testing.T) {
	p := lossPlanner(t, Rank) // backups: n2, n3 → n1; n4, n5 → n0; n6 → n3
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6"}
	for _, ev := range []BackupUp{{Agent: 2, Backup: 1}, {Agent: 3, Backup: 1}, {Agent: 4, Backup: 0}, {Agent: 5, Backup: 0}} {
		p.Step(ev)
	}
	if w := p.Links().StandbyWords(names); w != "4 of 5 standby link(s) to backup parents were up (not: n6 to n3)" {
		t.Errorf("words %q", w)
	}
	p.Step(BackupUp{Agent: 6, Backup: 3})
	if w := p.Links().StandbyWords(names); w != "5 of 5 standby link(s) to backup parents were up" {
		t.Errorf("words %q", w)
	}
}
