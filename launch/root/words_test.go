package root

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestPlainLinkError: the socket errors of a lost agent's link read in
// plain words, keep their cause for errors.Is, and other errors pass as
// they are.
func TestPlainLinkError(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, err := range []error{io.EOF, fmt.Errorf("link: %w", io.ErrUnexpectedEOF), reset, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}} {
		got := plainLinkError(err)
		if s := got.Error(); strings.Contains(s, "EOF") || strings.Contains(s, "tcp") || !strings.HasPrefix(s, "its link was ") {
			t.Errorf("plainLinkError(%v) = %q", err, s)
		}
		if !errors.Is(got, errors.Unwrap(got)) || errors.Unwrap(got) != err {
			t.Errorf("plainLinkError(%v) lost its cause", err)
		}
	}
	if got := plainLinkError(proto.ErrHeartbeat); got != proto.ErrHeartbeat {
		t.Errorf("plainLinkError(ErrHeartbeat) = %v", got)
	}
	if plainLinkError(nil) != nil {
		t.Error("plainLinkError(nil) != nil")
	}
}

// TestEndingSteps: the user's SIGTERM is not said twice ("SIGTERM to every
// rank, then SIGTERM"), and SIGKILL has no later step.
func TestEndingSteps(t *testing.T) {
	for s, want := range map[syscall.Signal]string{
		syscall.SIGTERM: "SIGTERM to every rank, SIGKILL after 5s",
		syscall.SIGINT:  "SIGINT to every rank, then SIGTERM, SIGKILL after 5s",
		syscall.SIGKILL: "SIGKILL to every rank",
	} {
		if got := endingSteps(s, 5*time.Second); got != want {
			t.Errorf("endingSteps(%v) = %q, want %q", s, got, want)
		}
	}
}

// TestReasonWords: the user's words for each of the planner's typed
// reasons, as stderr, the state log and the end-to-end tests read them.
func TestReasonWords(t *testing.T) {
	for _, c := range []struct {
		why  recovery.Reason
		want string
	}{
		{recovery.Reason{Kind: recovery.ReasonRankEnded, Rank: 1, Node: "n0", Code: 3, Text: "exited with code 3"}, "rank 1 on node n0 exited with code 3"},
		{recovery.Reason{Kind: recovery.ReasonRankEnded, Rank: 2, Node: "n1", Signal: 9, Text: "was killed by signal 9 (killed)"}, "rank 2 on node n1 was killed by signal 9 (killed)"},
		{recovery.Reason{Kind: recovery.ReasonRankEnded, Rank: 0, Node: "n0", Code: 127, Text: "failed to start: no such file"}, "rank 0 on node n0 failed to start: no such file"},
		{recovery.Reason{Kind: recovery.ReasonEndedTwice, Rank: 1, Node: "n0"}, "protocol error from the agent of node n0: exit message for rank 1: it had ended"},
		{recovery.Reason{Kind: recovery.ReasonNoSuchRank, Rank: 7, Node: "n0"}, "protocol error from the agent of node n0: exit message for rank 7: no such rank"},
		{recovery.Reason{Kind: recovery.ReasonRankAbort, Rank: 1, Node: "n0", Code: 5, Text: "bad input"}, "rank 1 on node n0 called Abort(5): bad input"},
		{recovery.Reason{Kind: recovery.ReasonRankAbort, Rank: 1, Node: "n0", Code: 258}, "rank 1 on node n0 called Abort(258)"},
		{recovery.Reason{Kind: recovery.ReasonRankBroke, Rank: 3, Node: "n1", Text: "broke the PMI protocol"}, "rank 3 on node n1 broke the PMI protocol"},
		{recovery.Reason{Kind: recovery.ReasonLaunch, Node: "n2", Text: "ssh n2: connection refused"}, "ssh n2: connection refused"},
		{recovery.Reason{Kind: recovery.ReasonProtocol, Node: "n1", Text: "unknown message type 99"}, "protocol error from the agent of node n1: unknown message type 99"},
		{recovery.Reason{Kind: recovery.ReasonMismatch, Node: "n1", Seq: 4, Op: "barrier", Want: "allgather"}, "collective 4: node n1 called barrier while others called allgather"},
		{recovery.Reason{Kind: recovery.ReasonStranded, Node: "n3", Seq: 2, Op: "barrier"}, "the ranks of node n3 ended without joining collective 2 (barrier) that other ranks are waiting in"},
		{recovery.Reason{Kind: recovery.ReasonTimeout, Limit: 90 * time.Second}, "the job exceeded --timeout 1m30s; terminating it"},
		{recovery.Reason{Kind: recovery.ReasonSignal, Signal: 2, Text: "SIGINT: ending the job"}, "SIGINT: ending the job"},
		{recovery.Reason{Kind: recovery.ReasonPMIUnderRank, Rank: 1, Node: "n0"}, "rank 1 on node n0 speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job"},
		{recovery.Reason{Kind: recovery.ReasonSaid, Text: "lost the agent of node n1: EOF"}, "lost the agent of node n1: EOF"},
	} {
		if got := reasonWords(c.why); got != c.want {
			t.Errorf("%+v: %q, want %q", c.why, got, c.want)
		}
	}
}
