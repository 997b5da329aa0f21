package recovery

import "time"

// Reason is why the planner records a failure, tells the user of it, or
// ends the job: a typed cause with the facts its words name. The planner
// writes no words for the kinds below but ReasonSaid: one renderer, the
// root's (launch/root/words.go, reasonWords), does, and the planner's
// tests assert on the reasons.
type Reason struct {
	Kind ReasonKind
	Rank int // NoRank: none
	Node string
	// Code is an exit code or Abort's; Signal a terminating signal.
	Code   int
	Signal int
	// Seq, Op and Want name a collective: its sequence number, the
	// operation a node called and the one the others called.
	Seq      uint64
	Op, Want string
	// Limit is --timeout.
	Limit time.Duration
	// Text is the rest: how a rank ended (ReasonRankEnded:
	// RankExited.Describe), Abort's message, how a rank broke its
	// protocol, the launcher's or the agent's error, the user's signal's
	// words, or (ReasonSaid) the whole of it.
	Text string
}

// ReasonKind is what a Reason is about.
type ReasonKind int

const (
	// ReasonSaid: Text says it all (the restart protocol's and the
	// relaunch's decisions, whose sentences the planner still composes).
	ReasonSaid ReasonKind = iota
	// ReasonRankEnded: rank Rank on Node ended as Text says.
	ReasonRankEnded
	// ReasonRankAbort: rank Rank on Node called Abort(Code), with the
	// message Text.
	ReasonRankAbort
	// ReasonRankBroke: rank Rank on Node broke its protocol (Text).
	ReasonRankBroke
	// ReasonLaunch: an agent could not start, or be given its share of
	// the job (Text: why).
	ReasonLaunch
	// ReasonProtocol: the agent of Node broke the protocol (Text).
	ReasonProtocol
	// ReasonNoSuchRank and ReasonEndedTwice: the agent of Node reported
	// the end of rank Rank, which does not exist, or had ended.
	ReasonNoSuchRank
	ReasonEndedTwice
	// ReasonMismatch: in collective Seq, Node called Op while others
	// called Want.
	ReasonMismatch
	// ReasonStranded: the ranks of Node ended without joining collective
	// Seq (Op) that other ranks wait in.
	ReasonStranded
	// ReasonTimeout: the job exceeded --timeout Limit.
	ReasonTimeout
	// ReasonSignal: the user's signal ended the job (Text: the root's
	// words for it).
	ReasonSignal
	// ReasonPMIUnderRank: rank Rank on Node speaks PMI-1 under
	// --restart rank.
	ReasonPMIUnderRank
)

// said is a reason in the planner's own words.
func said(text string) Reason { return Reason{Kind: ReasonSaid, Rank: NoRank, Text: text} }
