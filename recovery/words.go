package recovery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Words says a reason (Reason) in the user's words: the one renderer of
// the planner's reasons, for stderr, the state log's failure and final
// status, and the live report. The planner's decisions carry reasons, not
// these words, and its tests assert on the reasons (TestReasonWords pins
// the words).
func (r Reason) Words() string {
	switch r.Kind {
	case ReasonRankEnded, ReasonRankBroke:
		return r.rank()
	case ReasonRankAbort:
		msg := r.Text
		if msg != "" {
			msg = ": " + msg
		}
		return fmt.Sprintf("rank %d on node %s called Abort(%d)%s", r.Rank, r.Node, r.Code, msg)
	case ReasonProtocol:
		return fmt.Sprintf("protocol error from the agent of node %s: %s", r.Node, r.Text)
	case ReasonNoSuchRank:
		return fmt.Sprintf("protocol error from the agent of node %s: exit message for rank %d: no such rank", r.Node, r.Rank)
	case ReasonEndedTwice:
		return fmt.Sprintf("protocol error from the agent of node %s: exit message for rank %d: it had ended", r.Node, r.Rank)
	case ReasonMismatch:
		return fmt.Sprintf("collective %d: node %s called %s while others called %s", r.Seq, r.Node, r.Op, r.Want)
	case ReasonStranded:
		return fmt.Sprintf("the ranks of node %s ended without joining collective %d (%s) that other ranks are waiting in", r.Node, r.Seq, r.Op)
	case ReasonTimeout:
		return fmt.Sprintf("the job exceeded --timeout %v; terminating it", r.Limit)
	case ReasonPMIUnderRank:
		return fmt.Sprintf("rank %d on node %s speaks PMI-1 (MPI): an MPI job cannot replace one rank; run it with --restart job", r.Rank, r.Node)
	case ReasonRankRestart:
		if r.Alone {
			return fmt.Sprintf("%s; starting it again alone as incarnation %d (restart %d of %d): %s", r.rank(), r.Incarnation, r.Restarts, r.Max, aloneWords)
		}
		return fmt.Sprintf("%s; restarting it as incarnation %d (restart %d of %d)", r.rank(), r.Incarnation, r.Restarts, r.Max)
	case ReasonJobRestart:
		return fmt.Sprintf("%s; restarting the job (restart %d of %d)", r.rank(), r.Restarts, r.Max)
	case ReasonRestartLimit:
		what := "it was restarted"
		if r.JobWide {
			what = "the job was restarted"
		}
		return fmt.Sprintf("%s; %s %d time(s) (--max-restarts %d): %s", r.rank(), what, r.Restarts, r.Max, historyWords(r.History))
	case ReasonNoTable:
		return fmt.Sprintf("%s before every rank held the node table; %s", r.rank(), noTableWords)
	case ReasonAgentLost:
		return r.lost()
	case ReasonAgentNoTable:
		return fmt.Sprintf("%s; it was lost before every rank held the node table; %s", r.lost(), noTableWords)
	case ReasonAgentNoPlace:
		const silent = "its node went silent, a silent node is not tried again, no spare node is left (--spare-nodes)"
		if r.Place.Kind == PlaceNoHost {
			return fmt.Sprintf("%s; %s, and no surviving node is left to share its slots: the job ends", r.lost(), silent)
		}
		return fmt.Sprintf("%s; %s, and no surviving node has %d free slot(s) (--oversubscribe lets ranks share one): the job ends", r.lost(), silent, r.Place.Need)
	case ReasonAgentLimit:
		return fmt.Sprintf("%s; its agent was started again %d time(s) (--max-restarts %d): the job ends", r.lost(), r.Restarts, r.Max)
	case ReasonAgentJobLimit:
		return fmt.Sprintf("%s; the job was restarted %d time(s) (--max-restarts %d)", r.lost(), r.Restarts, r.Max)
	case ReasonAgentRankLimit:
		return fmt.Sprintf("%s; its rank %d was restarted %d time(s) (--max-restarts %d): %s", r.lost(), r.Rank, r.Restarts, r.Max, historyWords(r.History))
	case ReasonAgentRelaunch:
		again := fmt.Sprintf("%s; starting its agent again%s as incarnation %d (restart %d of %d)", r.lost(), r.Place.words(), r.Incarnation, r.Restarts, r.Max)
		switch {
		case r.JobRestarts > 0 && r.Decided:
			return fmt.Sprintf("%s, then restarting the job (restart %d of %d, decided already)", again, r.JobRestarts, r.Max)
		case r.JobRestarts > 0:
			return fmt.Sprintf("%s, then restarting the job (restart %d of %d)", again, r.JobRestarts, r.Max)
		case r.Alone:
			return fmt.Sprintf("%s, then its rank(s) %s alone as their next incarnation: their program never opened ftlaunch's rank protocol, no other rank is stopped", again, ranksList(r.Ranks))
		}
		return fmt.Sprintf("%s and its rank(s) %s as their next incarnation", again, ranksList(r.Ranks))
	case ReasonRelaunchFailed:
		return fmt.Sprintf("could not start the agent of node %s again (incarnation %d): %s: the job ends", r.Node, r.Incarnation, r.Text)
	case ReasonExpired:
		var ws []string
		for _, a := range r.Awaited {
			ws = append(ws, a.words())
		}
		return fmt.Sprintf("recovery (epoch %d) stopped at its %s stage: no answer within %v from %s", r.Epoch, r.Stage, r.Limit, strings.Join(ws, ", "))
	case ReasonSignal, ReasonCancel, ReasonSignalRank:
		return r.signalWords()
	case ReasonDetachEarly:
		return "SIGHUP before the root replicas are up: the job cannot go on without the front-end"
	}
	return r.Text // ReasonLaunch: the words came with it
}

const (
	aloneWords   = "its program never opened ftlaunch's rank protocol, no other rank is stopped"
	noTableWords = "its program opened ftlaunch's rank protocol (the client library), whose ranks are replaced under --restart rank only once that table exists (every rank called Publish): the job ends"
)

// rank says rank Rank on Node and how it ended.
func (r Reason) rank() string { return fmt.Sprintf("rank %d on node %s %s", r.Rank, r.Node, r.Text) }

// lost says the agent of Node was lost, and why.
func (r Reason) lost() string {
	if r.With != "" {
		return fmt.Sprintf("lost the agent of node %s: lost with %s above it in the launch tree", r.Node, r.With)
	}
	return fmt.Sprintf("lost the agent of node %s: %s", r.Node, r.Text)
}

func (pl Place) words() string {
	switch pl.Kind {
	case PlaceSpare:
		return " on spare node " + pl.Node
	case PlaceFreeSlots:
		return fmt.Sprintf(" on %s (free slots of a surviving node; its agent is named %s)", pl.Host, pl.Node)
	case PlaceShared:
		return fmt.Sprintf(" on %s (slots shared with the surviving node's %d rank(s), --oversubscribe; its agent is named %s)", pl.Host, pl.Load, pl.Node)
	}
	return ""
}

func historyWords(h []Ended) string {
	ws := make([]string, len(h))
	for i, e := range h {
		how := e.How
		if how == "" {
			how = "lost with its agent"
		}
		ws[i] = fmt.Sprintf("incarnation %d %s", e.Incarnation, how)
	}
	return strings.Join(ws, ", ")
}

func (a Awaited) words() string {
	switch {
	case a.Agent != NoAgent:
		return fmt.Sprintf("agent %d", a.Agent)
	case a.Rank != NoRank:
		return fmt.Sprintf("rank %d", a.Rank)
	case a.Incarnation == 0:
		return fmt.Sprintf("the agent of node %s", a.Node)
	}
	return fmt.Sprintf("the fence of node %s (incarnation %d)", a.Node, a.Incarnation)
}

// Words says why an adoption was refused in the user's words; "" for the
// refusals a root says nothing about by this renderer (RefuseUnknown,
// RefuseTaken: their words name the root's own view of the agent).
func (r RefuseReason) Words() string {
	switch r {
	case RefuseNoRecovery:
		return "the job does not recover from lost agents"
	case RefuseDeclaredLost:
		return "it was declared lost"
	case RefuseNotUp:
		return "it is not up"
	case RefuseEnding:
		return "the job is ending"
	}
	return ""
}

// FailedRanks says the ranks that failed, for the job's end when more
// than one did (the failure's own words named the first): each with its
// node and how it ended, by rank ("" for fewer than two).
func FailedRanks(failed []RankExited) string {
	if len(failed) < 2 {
		return ""
	}
	failed = slices.SortedFunc(slices.Values(failed), func(a, b RankExited) int { return cmp.Compare(a.Rank, b.Rank) })
	var b strings.Builder
	fmt.Fprintf(&b, "ftlaunch: %d ranks failed:\n", len(failed))
	for _, ev := range failed {
		fmt.Fprintf(&b, "  rank %-6d node %-16s %s\n", ev.Rank, ev.Node, ev.Describe())
	}
	return b.String()
}

// StandbyWords says how many standby links to backup parents were up,
// naming those that were not by their agents' names (names, by index).
func (v Links) StandbyWords(names []string) string {
	n, missing := v.Standbys()
	var not []string
	for _, x := range missing {
		not = append(not, names[x]+" to "+names[v.p.cfg.Tree.Backup(x)])
	}
	words := fmt.Sprintf("%d of %d standby link(s) to backup parents were up", n-len(missing), n)
	if len(not) > 0 {
		words += " (not: " + strings.Join(not, ", ") + ")"
	}
	return words
}
