package root

import (
	"errors"
	"fmt"
	"io"
	"syscall"

	"github.com/ftlaunch/ftlaunch/recovery"
)

// A link's end in people's words: "EOF" or "read tcp 10.0.0.3:4100->
// 10.0.0.1:37012: connection reset by peer" say nothing to whoever reads
// "lost the agent of node node3: ...". errors.Is and errors.As still see
// the cause.

// linkEnd is a link's end said plainly.
type linkEnd struct {
	words string
	err   error
}

func (e *linkEnd) Error() string { return e.words }
func (e *linkEnd) Unwrap() error { return e.err }

// plainLinkError says why a link to an agent ended in plain words, for the
// socket errors a lost agent gives; other errors (a heartbeat timeout, a
// protocol error) already say it and are returned as they are.
func plainLinkError(err error) error {
	var words string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		words = "its link was closed (the agent's process ended, or its host went down)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		words = "its link was reset (the agent's process ended, or its host restarted)"
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		words = "its host stopped answering on the network"
	default:
		return err
	}
	return &linkEnd{words: words, err: err}
}

// reasonWords says the planner's reason for a failure (recovery.Reason)
// in the user's words: the one renderer of the planner's reasons, for
// stderr, the state log's failure and final status, and the live report.
func reasonWords(r recovery.Reason) string {
	switch r.Kind {
	case recovery.ReasonRankEnded, recovery.ReasonRankBroke:
		return fmt.Sprintf("rank %d on node %s %s", r.Rank, r.Node, r.Text)
	case recovery.ReasonRankAbort:
		msg := r.Text
		if msg != "" {
			msg = ": " + msg
		}
		return fmt.Sprintf("rank %d on node %s called Abort(%d)%s", r.Rank, r.Node, r.Code, msg)
	case recovery.ReasonProtocol:
		return fmt.Sprintf("protocol error from the agent of node %s: %s", r.Node, r.Text)
	case recovery.ReasonNoSuchRank:
		return fmt.Sprintf("protocol error from the agent of node %s: exit message for rank %d: no such rank", r.Node, r.Rank)
	case recovery.ReasonEndedTwice:
		return fmt.Sprintf("protocol error from the agent of node %s: exit message for rank %d: it had ended", r.Node, r.Rank)
	case recovery.ReasonMismatch:
		return fmt.Sprintf("collective %d: node %s called %s while others called %s", r.Seq, r.Node, r.Op, r.Want)
	case recovery.ReasonStranded:
		return fmt.Sprintf("the ranks of node %s ended without joining collective %d (%s) that other ranks are waiting in", r.Node, r.Seq, r.Op)
	case recovery.ReasonTimeout:
		return fmt.Sprintf("the job exceeded --timeout %v; terminating it", r.Limit)
	case recovery.ReasonPMIUnderRank:
		return fmt.Sprintf("rank %d on node %s speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job", r.Rank, r.Node)
	}
	return r.Text // ReasonSaid, ReasonLaunch, ReasonSignal: the words came with it
}
