package recovery

import "time"

// Reason is why the planner records a failure, tells the user of it, or
// ends the job, or what it does about one: a typed cause with the facts
// its words name. The planner writes no words: one renderer (Words,
// words.go) does, and the planner's tests assert on the reasons.
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
	// Text is the rest: how a rank ended (ReasonRankEnded and the
	// restart policies' decisions about a rank: RankExited.Describe),
	// Abort's message, how a rank broke its protocol, the launcher's or
	// the agent's error (a lost agent's: AgentLost.Err), or the user's
	// signal's words.
	Text string
	// With: an agent lost with the agent of node With, above it in the
	// launch tree (Text is empty then).
	With string

	// The restart policies' decisions: Incarnation is what a rank or an
	// agent starts again as (ReasonRelaunchFailed: could not start as),
	// restart Restarts of --max-restarts Max; for a limit, the restarts
	// done. ReasonAgentRelaunch under policy Job: JobRestarts is the
	// job's restart it leads to (Decided: decided already, by an earlier
	// loss). Alone: its ranks start again alone (alone.go); Ranks are
	// the ranks a lost agent's relaunch starts again; Place, where the
	// agent of a node that went silent starts (or why nowhere: ReasonAgentNoPlace);
	// History, how each incarnation of Rank ended (a limit's).
	Incarnation   uint64
	Restarts, Max int
	JobRestarts   int
	Decided       bool
	JobWide       bool // ReasonRestartLimit: the job's restarts reached the limit, not the rank's
	Alone         bool
	Ranks         []int
	Place         Place
	History       []Ended
	// ReasonExpired: the recovery of Epoch stopped at Stage, Awaited
	// not heard from within Limit.
	Epoch   uint64
	Stage   Stage
	Awaited []Awaited
}

// Ended is how one incarnation of a rank ended: How (RankExited.Describe),
// or lost with its agent (How "").
type Ended struct {
	Incarnation uint64
	How         string
}

// PlaceKind is where the agent of a node that went silent starts again
// (placeSilent).
type PlaceKind int

const (
	// PlaceSame: on its own node (its node did not go silent).
	PlaceSame PlaceKind = iota
	// PlaceSpare: on spare node Node.
	PlaceSpare
	// PlaceFreeSlots: on surviving host Host's free slots, as agent Node
	// (GuestNode).
	PlaceFreeSlots
	// PlaceShared: on surviving host Host, sharing its slots with its
	// Load ranks (--oversubscribe), as agent Node.
	PlaceShared
	// PlaceNoHost: nowhere: no spare left and no surviving host to share
	// with (--oversubscribe).
	PlaceNoHost
	// PlaceNoSlots: nowhere: no spare left and no surviving host with
	// Need free slots.
	PlaceNoSlots
)

// Place is where the agent of a node that went silent starts again.
type Place struct {
	Kind PlaceKind
	Node string // the agent's node: the spare, or the guest's name
	Host string
	Load int
	Need int
}

// Awaited is what a recovery's stage waited for in vain (ReasonExpired):
// rank Rank (Agent NoAgent), the agent of Node started again (Rank NoRank,
// Incarnation 0), the fence of Node's incarnations up to Incarnation, or
// agent Agent's acknowledgement.
type Awaited struct {
	Rank        int
	Agent       int
	Node        string
	Incarnation uint64
}

// NoAgent is an Awaited's Agent when it is not an agent's acknowledgement.
const NoAgent = -1

// ReasonKind is what a Reason is about.
type ReasonKind int

const (
	// ReasonRankEnded: rank Rank on Node ended as Text says.
	ReasonRankEnded ReasonKind = iota + 1
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
	// ReasonSignal: the user's Signal ended the job (Text: who sent it
	// with ftlaunch kill; "": the front-end's terminal; Limit:
	// --kill-after); ReasonCancel: ftlaunch cancel (Text: who);
	// ReasonSignalRank: rank Rank died of a Signal the user sent with
	// ftlaunch kill (signals.go).
	ReasonSignal
	ReasonCancel
	ReasonSignalRank
	// ReasonPMIUnderRank: rank Rank on Node speaks PMI-1 under
	// --restart rank.
	ReasonPMIUnderRank

	// A rank Rank on Node that failed as Text says, under a restart
	// policy:
	// ReasonRankRestart: it starts again as Incarnation (restart Restarts
	// of Max), alone (Alone) or through the restart protocol.
	ReasonRankRestart
	// ReasonJobRestart: the job starts again (restart Restarts of Max).
	ReasonJobRestart
	// ReasonRestartLimit: it was restarted Restarts times (JobWide: the
	// job was) of Max: the job ends; History is how its incarnations
	// ended.
	ReasonRestartLimit
	// ReasonNoTable: it failed before every rank held the node table,
	// and its program opened the rank protocol: the job ends.
	ReasonNoTable

	// The agent of Node was lost (Text: why), and:
	// ReasonAgentLost: the job ends (no restart policy, or it is ending).
	ReasonAgentLost
	// ReasonAgentNoTable: it was lost before every rank held the node
	// table, and the program opened the rank protocol: the job ends.
	ReasonAgentNoTable
	// ReasonAgentNoPlace: its node went silent and there is no place to
	// start it again (Place): the job ends.
	ReasonAgentNoPlace
	// ReasonAgentLimit: it was started again Restarts times of Max: the
	// job ends.
	ReasonAgentLimit
	// ReasonAgentJobLimit: the job was restarted Restarts times of Max:
	// the job ends.
	ReasonAgentJobLimit
	// ReasonAgentRankLimit: its rank Rank was restarted Restarts times of
	// Max (History): the job ends.
	ReasonAgentRankLimit
	// ReasonAgentRelaunch: it starts again (at Place) as Incarnation
	// (restart Restarts of Max), then the job restarts (JobRestarts of
	// Max, Decided) under policy Job, or its Ranks start again, Alone or
	// through the restart protocol.
	ReasonAgentRelaunch
	// ReasonRelaunchFailed: the agent of Node could not start again as
	// Incarnation (Text: why): the job ends.
	ReasonRelaunchFailed
	// ReasonExpired: the recovery of Epoch stopped at its Stage: no answer
	// within Limit from Awaited.
	ReasonExpired
	// ReasonDetachEarly: a replicated front-end had SIGHUP before its
	// root replicas' group was up: it cannot leave the job to them, and
	// the signal ends the job (a warning, not the job's failure).
	ReasonDetachEarly
)
