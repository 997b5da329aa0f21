// Package recovery decides what the root does about failures. It is a pure
// state machine in the manner of etcd-io/raft's Step: the root feeds it
// events (a rank ended, an agent was lost, a protocol error, the timeout)
// and carries out the actions it returns (record the failure, tell the
// user, terminate the job). It starts no goroutines, does no I/O, reads no
// clock and draws no random numbers, so every decision can be tested as a
// table of (state, event) → actions.
//
// Policy None ends the job at its first failure, naming its cause; nothing
// after it is a failure of its own. Policies Rank and Job run the restart
// protocol (restart.go): each phase is committed through a Commit action,
// and only its completion, which comes back as the Committed event, lets
// the planner send what the phase does. A lost agent is started again
// first (relaunch.go), and no rank starts again before the lost
// incarnation's fence is confirmed (FenceDone). Under Rank, a program that
// never opened the rank protocol has its ranks started again alone
// (alone.go); which failure is recovered for which program is
// docs/recovery.md's support matrix, and TestSupportMatrix's.
//
// A Planner is not safe for concurrent use: one goroutine (the root's
// event loop) owns it.
package recovery

import (
	"fmt"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// Exit codes the planner hands out. They match the launcher's: 1 for
// ftlaunch's own failures, 124 for --timeout (as GNU timeout).
const (
	ExitLauncher = 1
	ExitUsage    = 2
	ExitTimeout  = 124
)

// Policy is what the job does about a failure.
type Policy int

const (
	// None ends the job at its first failure, cleanly.
	None Policy = iota
	// Rank replaces a failed rank: suspend, respawn, patch, resume.
	Rank
	// Job ends every rank and starts them all again on the standing tree.
	Job
)

func (p Policy) String() string {
	switch p {
	case None:
		return "none"
	case Rank:
		return "rank"
	case Job:
		return "job"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Record is the policy as the job's record keeps it: "" for None, which
// ParsePolicy reads back.
func (p Policy) Record() string {
	if p == None {
		return ""
	}
	return p.String()
}

// ParsePolicy reads --restart's value.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "none", "":
		return None, nil
	case "rank":
		return Rank, nil
	case "job":
		return Job, nil
	}
	return None, fmt.Errorf("unknown restart policy %q (none, rank or job)", s)
}

// Phase is where the job stands, as far as failures are concerned.
type Phase int

const (
	// Running: a failure now is handled by the policy.
	Running Phase = iota
	// Recovering: the restart protocol is replacing failed ranks (or the
	// whole job); RecoveryStage tells where it is.
	Recovering
	// Ending: the job is being terminated (a failure, the timeout, the
	// user's signal); later failures are consequences, not causes.
	Ending
	// Over: every rank ended and the agents were told to exit; a link
	// that ends now is an agent leaving, not a loss.
	Over
)

func (p Phase) String() string {
	switch p {
	case Running:
		return "running"
	case Recovering:
		return "recovering"
	case Ending:
		return "ending"
	case Over:
		return "over"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Failure is the failure that ended the job.
type Failure struct {
	Code int    // the job's exit code
	Why  Reason // its cause, which the user is told
}

// Config sets a planner up.
type Config struct {
	Policy Policy
	// Ranks is the job's size.
	Ranks int
	// Resumed: the planner serves a root that took over from a lost one,
	// so agents report again what the lost root already knew; a second
	// report of a rank's end is evidence repeated, not a protocol error.
	Resumed bool
	// Ended are the ranks whose end a resumed root knows from the
	// replicated state; EndedFailed those of them that failed.
	Ended       []int
	EndedFailed []int

	// For the restart policies:
	// MaxRestarts bounds restarts: per rank under Rank, per job under Job.
	MaxRestarts int
	// Agents is the number of agents, which acknowledge each phase.
	Agents int
	// RankAgent[r] is the agent that runs rank r.
	RankAgent []int
	// AckTimeout bounds how long the planner waits for the agents'
	// acknowledgements of a phase (or a respawned rank's address) before
	// it gives up on the recovery.
	AckTimeout time.Duration
	// TableReady: the first node table was published already (a new
	// leader's planner).
	TableReady bool
	// Incarnations and RankRestarts, when set, are every rank's current
	// incarnation and restart count as the replicated node table has them
	// (a new leader's planner).
	Incarnations []uint64
	RankRestarts []int
	// Spares are nodes, in order, whose agent is started on demand to
	// take the place of a lost agent's node that went silent (a silent
	// node is not tried again). Each serves once.
	Spares []string
	// Nodes[a] is the node agent a runs on ("": unknown, never a place
	// for another agent's ranks).
	Nodes []string
	// Slots is how many ranks each node (by host name) holds, as the
	// allocation says (its slot count, or --ppn); a node with no known
	// count has no free slot. With no spare left, a silent node's ranks
	// go to a surviving node's free slots, or with Oversubscribe to the
	// least loaded surviving node (relaunch.go).
	Slots         map[string]int
	Oversubscribe bool

	// For agents below agents (nodeloss.go):
	// Tree is the launch tree (nil: none, the agents do not move). The
	// planner changes it in Step only; the root reads it.
	Tree *topology.Tree
	// OrphanWait bounds how long the loss of an agent waits for its
	// children to reach their backup parents: the heartbeat's timeout (an
	// orphan that missed the root's word sees its parent's link fall
	// silent) and a margin.
	OrphanWait time.Duration
	// SelfFence are the bounds of the agents' self-fence (fence.go): a
	// fence that has not reached its node counts as the node's own once
	// they passed.
	SelfFence SelfFence
	// Started is when this root started: a child of a lost root that a
	// successor never heard from has been silent since (silenceAt).
	Started time.Time
	// Launching: the agents are being started (not a successor's): a
	// restart of the job waits until every one is up (LaunchUp).
	Launching bool
	// Up are the agents up already when the planner starts (a
	// successor's, as the replicated state records them): the others'
	// links are not up yet (links.go).
	Up []bool
	// KillAfter is --kill-after, for the words of the user's signal's
	// end.
	KillAfter time.Duration
	// RanksStarted and Pids are the ranks that ran already and their
	// processes (a successor's, as the replicated state records them).
	RanksStarted []bool
	Pids         []int
	// ReplicaHosts are the agents that host a root replica, RootNode the
	// node this root runs on (a successor's, for RefillGroup).
	ReplicaHosts []int
	RootNode     string
}

// Planner holds the state the root's failure decisions depend on.
type Planner struct {
	cfg     Config
	phase   Phase
	failure *Failure
	ranks   []rankState

	// The restart protocol (restart.go).
	epoch    uint64 // bumped by every recovery decision and leader change
	version  uint64 // node-table version: bumped by every patch
	restarts int    // job restarts (policy Job)
	rc       *recovering
	table    bool            // the first node table was published (TablePublished)
	opened   bool            // a rank opened the rank protocol (ProtocolOpened)
	agents   []agentState    // relaunch.go
	silent   map[string]bool // hosts that went silent (relaunch.go)
	// alone are the ranks a recovery under way starts again alone
	// (alone.go): told the root once each runs (Over).
	alone []int
	// losses are the agents lost whose children are moving to new
	// parents (nodeloss.go); lossSeq numbers them.
	losses  []*nodeLoss
	lossSeq int
	// led is the rank ledger (ledger.go): who counts as ended, who is
	// owed a restart.
	led ledger
	// tally counts the acknowledgements of a recovery's last phase
	// (settle.go); starting is how many agents of the launch are not up
	// yet, and held the epoch of a restart of the job that waits for
	// them (0: none).
	tally    *ackTally
	starting int
	held     uint64
	// leads: a successor's planner was told it leads (Adopting);
	// refusedSaid, the incarnation of each agent whose refused adoption
	// was said (RefuseAdoption.Held: once, it asks again and again).
	leads       bool
	refusedSaid map[int]uint64
	// links are the root's links to the agents (links.go).
	links []link
	// userSignals are the signals the user sent every rank with ftlaunch
	// kill that do not end the job by themselves; endSignal, the user's
	// signal that ends it (0: none). signals.go.
	userSignals map[int]bool
	endSignal   int
	// killResent: a terminate was overdue and the user was told
	// (overdue.go).
	killResent bool
}

// New returns a planner for a job that is running.
func New(cfg Config) *Planner {
	p := &Planner{cfg: cfg, ranks: make([]rankState, cfg.Ranks), version: 1, table: cfg.TableReady, agents: make([]agentState, cfg.Agents),
		led: newLedger(cfg.Ranks, cfg.Ended, cfg.EndedFailed), userSignals: map[int]bool{}}
	if cfg.Launching && !cfg.Resumed {
		p.starting = cfg.Agents
	}
	for a := range p.agents {
		p.agents[a].inc = 1
		if a < len(cfg.Nodes) {
			p.agents[a].node = cfg.Nodes[a]
		}
	}
	p.links = newLinks(cfg.Agents, cfg.Up, func(a int) uint64 { return p.agents[a].inc })
	for r := range p.ranks {
		p.ranks[r].inc = 1
		if r < len(cfg.RankAgent) {
			p.ranks[r].agent = cfg.RankAgent[r]
		}
		if r < len(cfg.Incarnations) && cfg.Incarnations[r] > 0 {
			p.ranks[r].inc = cfg.Incarnations[r]
			p.led.ranks[r].runs = cfg.Incarnations[r]
		}
		if r < len(cfg.RanksStarted) && r < len(cfg.Pids) {
			p.led.ranks[r].started, p.led.ranks[r].pid = cfg.RanksStarted[r], cfg.Pids[r]
		}
		if r < len(cfg.RankRestarts) {
			p.ranks[r].restarts = cfg.RankRestarts[r]
		}
	}
	for _, r := range cfg.Ended {
		if r >= 0 && r < cfg.Ranks {
			p.ranks[r].st = rEnded
		}
	}
	return p
}

// Phase is the job's phase.
func (p *Planner) Phase() Phase { return p.phase }

// Ending reports whether the job is being terminated or is over: no
// failure starts anything any more.
func (p *Planner) Ending() bool { return p.phase == Ending || p.phase == Over }

// Failure is the failure that ended the job, or nil.
func (p *Planner) Failure() *Failure { return p.failure }

// Resumed reports whether the planner serves a root that took over.
func (p *Planner) Resumed() bool { return p.cfg.Resumed }

// Step takes one event and returns what the root must do, in order.
func (p *Planner) Step(ev Event) []Action {
	switch ev := ev.(type) {
	case RankExited:
		before := p.Status()
		acts := p.rankEnd(ev)
		p.lastEnd(ev, notItsFailure(ev, before, p.Status()))
		return acts
	case RankAborted:
		code := ev.Code & 0xff
		if code == 0 {
			code = 1
		}
		if ev.Failed {
			return p.endFor(ev.Node, ev.Rank, code, Reason{Kind: ReasonRankBroke, Rank: ev.Rank, Node: ev.Node, Text: ev.Msg})
		}
		return p.endFor(ev.Node, ev.Rank, code, Reason{Kind: ReasonRankAbort, Rank: ev.Rank, Node: ev.Node, Code: ev.Code, Text: ev.Msg})
	case AgentLost:
		p.closeLink(ev.Agent, ev.Incarnation)
		acts := p.agentLost(ev)
		p.reviveRelaunched(ev.Agent)
		return acts
	case Relaunched, RelaunchFailed:
		return p.relaunchStep(ev)
	case LaunchFailed:
		if l := p.linkOf(ev.Agent); l != nil && (l.up || l.closed) {
			return nil // up after all, or closed already: stale
		}
		// It and the agents below it never run.
		acts := p.closeSubtree(ev.Agent, nil, ev.Msg)
		if p.phase == Ending || p.phase == Over {
			return acts // the job is ending: agents not started yet are not needed
		}
		return append(acts, p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonLaunch, Rank: NoRank, Node: ev.Node, Text: ev.Msg})...)
	case LaunchError:
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonLaunch, Rank: NoRank, Node: ev.Node, Text: ev.Msg})
	case ProtocolError:
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonProtocol, Rank: NoRank, Node: ev.Node, Text: ev.Err})
	case CollectiveMismatch:
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonMismatch, Rank: NoRank, Node: ev.Node, Seq: ev.Seq, Op: ev.Op, Want: ev.Want})
	case Stranded:
		if p.phase != Running || p.lossPending(ev.Agent) {
			// Ending, or ranks are being replaced; or the node's agent
			// was lost and its ranks' end is not final.
			return nil
		}
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonStranded, Rank: NoRank, Node: ev.Node, Seq: ev.Seq, Op: ev.Op})
	case TimedOut:
		return p.endJob(ExitTimeout, Reason{Kind: ReasonTimeout, Rank: NoRank, Limit: ev.Limit})
	case Signaled:
		return p.signaled(ev)
	case Finished:
		p.phase, p.rc = Over, nil
		return nil
	case TablePublished:
		p.table = true
		return nil
	case ProtocolOpened:
		p.opened = true
		return nil
	case FenceDone:
		return p.fenceDone(ev)
	case FenceBegan:
		return p.fenceBegan(ev)
	case SelfFenceDue:
		return p.selfFenceDue(ev)
	case RankStarted:
		p.started(ev)
		return p.rankStarted(ev)
	case RanksStarted:
		return p.ranksStarted(ev)
	case PMIInit:
		if p.cfg.Policy == Rank {
			return p.endFor(ev.Node, ev.Rank, ExitUsage, Reason{Kind: ReasonPMIUnderRank, Rank: ev.Rank, Node: ev.Node})
		}
		return nil
	case LinkLost:
		return p.linkLost(ev)
	case TerminateOverdue:
		return p.terminateOverdue()
	case AgentUp, AgentDone, Adopted, FallbacksTold, BackupUp:
		return p.linkStep(ev)
	case GossipDead:
		return p.gossipDead(ev)
	case OrphansDue:
		return p.orphansDue(ev)
	case Reparented:
		return p.reparented(ev)
	case AdoptAsked:
		return p.adoptAsked(ev)
	case LaunchUp:
		return p.launchUp()
	case Waiting:
		return p.waiting(ev)
	case Adopting:
		return p.adopting(ev)
	case StartDue, AdoptDue:
		return p.takeover(ev)
	case PeersGone:
		return p.peersGone(ev)
	case Resumed:
		return append(p.restartStep(ev), p.lastAck(ev.Agent, ev.Epoch, StageResume)...)
	case Restarted:
		return append(p.restartStep(ev), p.lastAck(ev.Agent, ev.Epoch, StageRestartJob)...)
	case Committed, Suspended, Respawned, Patched, Expired, LeaderChanged:
		return p.restartStep(ev)
	}
	panic(fmt.Sprintf("recovery: unknown event %T", ev))
}

// rankEnd takes a rank's end: counted, and decided.
func (p *Planner) rankEnd(ev RankExited) []Action {
	if ev.Rank >= 0 && ev.Rank < len(p.ranks) && ev.Incarnation != 0 && ev.Incarnation < p.ranks[ev.Rank].inc {
		return nil // an older incarnation's end (told again, or replaced by a restart of the job): stale, counted as nothing
	}
	byUser := p.endedByUser(ev)
	p.countEnd(ev.Rank, ev.Incarnation, !ev.Clean())
	acts := append(byUser, p.rankExited(ev)...)
	if ev.Rank >= 0 && ev.Rank < len(p.ranks) {
		p.reviveStarting(ev.Rank)
	}
	return acts
}

func (p *Planner) rankExited(ev RankExited) []Action {
	if ev.Rank < 0 || ev.Rank >= len(p.ranks) {
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonNoSuchRank, Rank: ev.Rank, Node: ev.Node})
	}
	rs := &p.ranks[ev.Rank]
	if ev.Incarnation != 0 && ev.Incarnation < rs.inc {
		return nil // an older incarnation's end: evidence that is stale
	}
	if rs.st == rEnded || rs.st == rFailed {
		if p.cfg.Resumed || rs.st == rFailed {
			return nil // reported again: after a failover, or by two sources
		}
		return p.endFor(ev.Node, NoRank, ExitLauncher, Reason{Kind: ReasonEndedTwice, Rank: ev.Rank, Node: ev.Node})
	}
	if ev.Clean() || p.phase == Ending || p.phase == Over || p.cfg.Policy == None {
		rs.st = rEnded
		if ev.Clean() || p.phase == Ending || p.phase == Over {
			// A rank killed by the termination in progress is not a failure
			// of its own; one that fails meanwhile is not the job's cause
			// either.
			return nil
		}
		return p.endFor(ev.Node, ev.Rank, ev.ExitCode(), Reason{Kind: ReasonRankEnded, Rank: ev.Rank, Node: ev.Node, Code: ev.Code, Signal: ev.Signal, Text: ev.Describe()})
	}
	return p.rankFailed(ev)
}

// endJob is the policy None's answer to a failure: the first one is
// recorded, told and ends the job; later ones change nothing.
func (p *Planner) endJob(code int, why Reason) []Action {
	return p.endFor("", NoRank, code, why)
}

// endFor is endJob for a failure of a node or a rank, which the record
// names.
func (p *Planner) endFor(node string, rank, code int, why Reason) []Action {
	if p.failure != nil {
		return nil
	}
	p.failure = &Failure{Code: code, Why: why}
	acts := []Action{Record{Why: why, Node: node, Rank: rank}, Report{Why: why}}
	if p.phase == Running || p.phase == Recovering {
		// A recovery in progress is dropped; the agents wake ranks they
		// stopped (SIGCONT after the SIGTERM) as they terminate them.
		acts = append(acts, Terminate{})
		p.unrevive()
	}
	if p.phase != Over {
		p.phase, p.rc = Ending, nil
	}
	return acts
}

// ExitCode is the job's exit code for a rank that ended so.
func (ev RankExited) ExitCode() int {
	if ev.Signal != 0 {
		return 128 + ev.Signal
	}
	if ev.Code&0xff == 0 {
		return 1
	}
	return ev.Code & 0xff
}

// Clean reports whether the rank ended with code 0, no signal, no reason.
func (ev RankExited) Clean() bool { return ev.Code == 0 && ev.Signal == 0 && ev.Reason == "" }

// Describe says how the rank ended, for the user.
func (ev RankExited) Describe() string {
	switch {
	case ev.Reason != "" && ev.Code == 127:
		return "failed to start: " + ev.Reason
	case ev.Reason != "":
		return ev.Reason
	case ev.Signal != 0:
		return fmt.Sprintf("was killed by signal %d (%v)", ev.Signal, syscall.Signal(ev.Signal))
	default:
		return fmt.Sprintf("exited with code %d", ev.Code)
	}
}

// An Event is something the root learned: one of the types below.
type Event interface{ isEvent() }

// RankExited: a rank's end, reported by its agent (or counted by the root
// for the ranks of an agent that is gone).
type RankExited struct {
	Rank        int
	Incarnation uint64 // the incarnation that ended; 0: the current one
	Node        string
	Code        int    // exit code
	Signal      int    // terminating signal, or 0
	Reason      string // set when ftlaunch could not run it or lost it
	Skipped     bool   // it was never started (an earlier rank of its node failed to start)
}

// RankAborted: a rank called Abort, or (Failed) broke its protocol.
type RankAborted struct {
	Rank   int
	Node   string
	Code   int
	Msg    string
	Failed bool
}

// AgentLost: an agent's link ended before it said it was done, or it went
// with an agent above it. The planner steps it itself for each agent of a
// loss once the loss is settled (Lost, after LinkLost and the orphans'
// wait); the root never does.
type AgentLost struct {
	Agent int // its index
	// Incarnation is the agent incarnation that was lost (1: the first
	// agent of the node; 0: the current one). A loss of an older one is
	// stale evidence.
	Incarnation uint64
	Node        string
	Err         string
	// Silent: the agent stopped answering (a heartbeat's timeout), rather
	// than its link ending or its process exiting: its node may be gone,
	// and is not tried again.
	Silent bool
	// With is the node of the agent it was lost with, above it in the
	// launch tree ("": it was lost itself, Err says why).
	With string
}

// LaunchFailed: agent Agent (of Node) could not be started: it and the
// agents below it never run.
type LaunchFailed struct {
	Agent int
	Node  string
	Msg   string
}

// LaunchError: the root could not give an agent that is up its share of
// the job (prestaging, its children's credentials, sending it).
type LaunchError struct {
	Node string
	Msg  string
}

// ProtocolError: an agent sent what the protocol does not allow.
type ProtocolError struct {
	Node string
	Err  string
}

// CollectiveMismatch: a node called another collective than the others
// under the same sequence number.
type CollectiveMismatch struct {
	Seq      uint64
	Node     string
	Op, Want string
}

// Stranded: every rank of a node ended without joining a collective the
// others wait in: the wait would last forever.
type Stranded struct {
	Seq   uint64
	Agent int // the node's agent
	Node  string
	Op    string
}

// TimedOut: the job's --timeout expired.
type TimedOut struct{ Limit time.Duration }

// Finished: every rank ended and the agents were told to exit.
type Finished struct{}

func (RankExited) isEvent()         {}
func (RankAborted) isEvent()        {}
func (AgentLost) isEvent()          {}
func (LaunchFailed) isEvent()       {}
func (LaunchError) isEvent()        {}
func (ProtocolError) isEvent()      {}
func (CollectiveMismatch) isEvent() {}
func (Stranded) isEvent()           {}
func (TimedOut) isEvent()           {}
func (Signaled) isEvent()           {}
func (Finished) isEvent()           {}

// An Action is something the root must do: one of the types below, carried
// out in the order Step returned them.
type Action interface{ isAction() }

// Record appends the failure to the job's state log (through the journal's
// queue: the job's end does not wait for it to be synced), naming the node
// and the rank it is about (NoRank: none).
type Record struct {
	Why  Reason
	Node string
	Rank int
}

// NoRank is a Record's Rank when it is about no one rank.
const NoRank = -1

// Report tells the user.
type Report struct{ Why Reason }

// Terminate ends every rank: SIGTERM, then SIGKILL after the job's
// kill-after.
type Terminate struct{}

func (Record) isAction()    {}
func (Report) isAction()    {}
func (Terminate) isAction() {}
