package recovery

import (
	"testing"
	"time"
)

// TestReasonWords: the user's words for each of the planner's typed
// reasons, as stderr, the state log and the end-to-end tests read them.
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
		{Reason{Kind: ReasonSignal, Signal: 2, Text: "SIGINT: ending the job"}, "SIGINT: ending the job"},
		{Reason{Kind: ReasonPMIUnderRank, Rank: 1, Node: "n0"}, "rank 1 on node n0 speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job"},
		{Reason{Kind: ReasonAgentLost, Node: "n1", Text: "EOF"}, "lost the agent of node n1: EOF"},
	} {
		if got := c.why.Words(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.why, got, c.want)
		}
	}
}
