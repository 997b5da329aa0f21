package trial

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/fence"
)

// Ending is how a job may end.
type Ending string

// The endings.
const (
	// Completed: the final status is committed with exit code 0.
	Completed Ending = "completed"
	// Failed: the final status is committed with a non-zero exit code and
	// a message naming the fault.
	Failed Ending = "failed"
	// Unfinished: the front-end was lost with no replica to take over;
	// no final status, nothing left running.
	Unfinished Ending = "unfinished"
)

// Applied is an action as the runner carried it out.
type Applied struct {
	Action
	Time time.Time // when the signal went (zero: not applied)
	PID  int
	// Skipped says why the action was not applied (the job ended first,
	// its target was already gone); empty when applied.
	Skipped string
	// GroupFormed: with replicas, the raft group had every replica when
	// the fault fell (for a root fault: the front-end was killed).
	GroupFormed bool
	// Tabled: the job's first node table was published before the fault
	// was detected (the runner's observation; a run-phase fault always
	// is). Under --restart rank a client-library program's ranks are
	// replaced through the protocol once the table exists (ExpectFor).
	Tabled bool
	// During is the recovery stage the fault fell in, as the live report
	// showed it (--when recovery); empty otherwise.
	During string
	// RanksEnded: every rank of the job had ended when the fault fell
	// (the runner saw each run and none running then, and no recovery
	// under way): the job's outcome is decided, but its agents are still
	// up (reporting the ends, waiting for the replicas' final status). A
	// lost agent then ends the job if the root had not heard every rank's
	// end yet, and changes nothing if it had: either ending may come.
	RanksEnded bool
}

// Policy is the job's restart policy (ftlaunch run --restart).
type Policy string

// The policies.
const (
	NoRestart   Policy = "none" // any failure ends the job
	RestartRank Policy = "rank" // a failed rank is replaced
	RestartJob  Policy = "job"  // every rank is started again
)

// ParsePolicy reads --restart.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case NoRestart, RestartRank, RestartJob:
		return p, nil
	}
	return "", fmt.Errorf("--restart %q: want none, rank or job", s)
}

// Expectation is what the policy promises for a trial: one of Endings,
// and for Failed a message naming one of Names.
type Expectation struct {
	Endings []Ending
	Names   []string
	// Lost lists the replica nodes that may lag (their agent was killed
	// or stopped; "fe" style names are the caller's): excluded from the
	// digest comparison.
	Lost []string
	// RootLost: the front-end was killed.
	RootLost bool
	// Recover: the policy promises to recover from the faults applied (a
	// rank's, under --restart rank or job): every failure in the log must
	// be followed by a recovery that ran to its end.
	Recover bool
	// NoMajority: a replica's host was lost before every replica agent
	// had joined the raft group. While only one of them votes, losing its
	// node leaves no majority: the job ends as it would, but its final
	// status cannot be recorded (docs/guide.md, "a lost front-end"), so it
	// may end unfinished with its failure open in the log.
	NoMajority bool
}

// Program is what the job runs, as far as the restart policies are
// concerned (docs/recovery.md, "Support matrix").
type Program string

// The programs.
const (
	// Library: a program of ftlaunch's client library (the chaos app,
	// ringapp): it opens the rank protocol at its start, and under
	// --restart rank its ranks are replaced through the protocol once
	// the first node table exists.
	Library Program = "library"
	// MPI: an MPI program over PMI-1 (MPICH). --restart rank refuses it
	// at its first rank's PMI init; --restart job starts every rank again.
	MPI Program = "mpi"
	// Plain: a program that never speaks to ftlaunch. Under --restart
	// rank its failed ranks (or a lost agent's) are started again alone
	// (recovery/alone.go), at any time.
	Plain Program = "plain"
)

// Expect is ExpectFor a client-library program.
func Expect(applied []Applied, t Topology, replicas int, policy Policy, phase Phase, root string) Expectation {
	return ExpectFor(Library, applied, t, replicas, policy, phase, root)
}

// ExpectFor returns the promise for the applied actions under the policy
// with the given number of root replicas, for a job running prog. root is
// the front-end's replica name (its host name) for Lost.
//
// What the planner promises (recovery/, TestSupportMatrix): under
// --restart job every failure is recovered at any time after the first
// agent is up (every launch-phase fault falls after its target's ranks
// run): a failed rank and a lost agent alike restart the job. Under
// --restart rank a plain program's failed rank, or a lost agent's ranks,
// start again alone at any time; a client-library program's only once
// the first node table exists: before it, the job ends if a rank had
// opened the rank protocol when the failure came, and its ranks start
// again alone if none had. The runner sees the table (Tabled, and every
// run-phase fault) but not the protocol's opening, so a launch-phase
// fault before the table may end either way: failed naming it, or
// completed with its recovery. MPI under --restart rank is refused
// (Validate).
//
// A lost agent is started again wherever it is in the tree
// (recovery/relaunch.go, launch/root/reparent.go): the agents below it
// move to their backup parents (or, without one, are lost with it and
// started again too), and it starts again as a child of the root (a root
// replica's host without its replica): a SIGKILLed one (its link ends
// with EOF) on its own node, one whose node went silent (a stopped agent,
// a crashed or cut-off host) on the next spare node (Topology.Spares), as
// long as one is left. A silent node with no spare left ends the job
// naming the node, and takes its subtree's replicas with it. A replica's
// host lost before every replica agent joined may leave the group without
// a majority: the job may then end unfinished (NoMajority). A slow agent
// or link, and a front-end stalled for StallFor (with or without root
// replicas), must not fail the job.
func ExpectFor(prog Program, applied []Applied, t Topology, replicas int, policy Policy, phase Phase, root string) Expectation {
	var e Expectation
	// mayFail: a fault that ends the job or is recovered, as an order of
	// events the runner cannot see decides (a client-library program
	// under --restart rank before its table).
	failed, mayFail, unfinished := false, false, false
	// Silent nodes that a spare would take, in the order applied; which of
	// them the planner hears of first is timing, so when there are more
	// than spares, any of them may be the one that ends the job.
	var silent []string
	for _, a := range applied {
		if a.Skipped != "" || a.Time.IsZero() {
			continue
		}
		switch a.Fault {
		case Slow, Stall, RaftCut:
			// Slow is not dead, a stalled front-end is not lost, nor
			// one cut off from its root group: the job must not fail.
		case Root:
			e.RootLost = true
			e.Lost = append(e.Lost, root)
			if replicas <= 1 || !a.GroupFormed {
				unfinished = true
			}
		case Rank:
			switch recovers(prog, a, policy, phase) {
			case yes:
				e.Recover = true
				continue
			case maybe:
				e.Recover, mayFail = true, true
			default:
				failed = true
			}
			e.Names = append(e.Names, a.Target.String())
		default:
			r := relaunched(prog, a, t, policy, phase)
			if r == yes && a.RanksEnded {
				// Every rank had ended when the agent was lost: a root
				// that had heard every end has nothing to recover (no
				// failure is recorded, the job completes), one that had
				// not may recover the agent or end the job (the
				// restarted ranks find no peer): either ending, and no
				// recovery promised (a replica fault waits for the
				// group to form, which on a loaded machine may be after
				// the ranks' end: chaos-interior 2026-11-28, "no
				// recovery of the 0 failure(s)").
				r = maybe
			}
			if r != no && !a.RanksEnded {
				e.Recover = true
			}
			if r != no {
				e.NoMajority = e.NoMajority || replicas > 1 && !a.GroupFormed && slices.Contains(t.Replicas, a.Target.Node)
				if Silent(a.Fault) {
					silent = append(silent, t.Name(a.Target.Node))
				}
			}
			if r == yes {
				e.Lost = append(e.Lost, t.Name(a.Target.Node))
				continue
			}
			if r == no && !a.RanksEnded {
				failed = true
			} else {
				mayFail = true
			}
			e.Names = append(e.Names, t.Name(a.Target.Node))
			for _, n := range t.Subtree(a.Target.Node) {
				e.Lost = append(e.Lost, t.Name(n))
				// Whether or not this replica had become a voter (the
				// runner sees the joins only as the front-end prints
				// them), the group may have lost its majority.
				e.NoMajority = e.NoMajority || replicas > 1 && !a.GroupFormed && slices.Contains(t.Replicas, n)
			}
		}
	}
	if len(silent) > len(t.Spares) {
		// No spare left for one of them: the job ends naming it.
		failed = true
		e.Names = append(e.Names, silent...)
	}
	switch {
	case unfinished && (failed || mayFail), failed && e.NoMajority:
		// Whichever comes first: the failure committed, or the root (or
		// the group's majority) lost.
		e.Endings = []Ending{Failed, Unfinished}
	case unfinished:
		e.Endings = []Ending{Unfinished}
	case failed:
		e.Endings = []Ending{Failed}
	case mayFail && e.NoMajority:
		e.Endings = []Ending{Completed, Failed, Unfinished}
	case mayFail:
		e.Endings = []Ending{Completed, Failed}
	case e.NoMajority:
		e.Endings = []Ending{Completed, Unfinished}
	default:
		e.Endings = []Ending{Completed}
	}
	return e
}

// ran says whether faults of the phase fall once every rank runs (after
// the first node table, under a restart policy): the run, or a recovery.
func ran(phase Phase) bool { return phase == Run || phase == Recovering }

// Silent says whether fault f makes its node go silent (no EOF, no RST:
// found by the heartbeat's timeout), so that a relaunch goes to a spare.
func Silent(f Fault) bool { return f == Stop || f == Node || f == Partition }

// verdict is whether the policy recovers a fault: yes, no, or maybe (an
// order of events the runner cannot see decides).
type verdict int

const (
	no verdict = iota
	yes
	maybe
)

// recovers says whether the policy recovers the loss of a rank (or of
// its ranks, for an agent): under job always; under rank a plain
// program's always, a client-library program's once its table exists
// (run-phase faults, and launch-phase ones detected after the table),
// before that maybe (it ends the job if a rank had opened the rank
// protocol).
func recovers(prog Program, a Applied, policy Policy, phase Phase) verdict {
	switch {
	case policy == RestartJob:
		return yes
	case policy != RestartRank || prog == MPI:
		return no
	case prog == Plain, ran(phase), a.Tabled:
		return yes
	}
	return maybe
}

// relaunched says whether the policy starts the agent hit by a again: a
// SIGKILLed one on its node, a silent one on a spare (its ranks then
// recover as recovers says).
func relaunched(prog Program, a Applied, t Topology, policy Policy, phase Phase) verdict {
	n := a.Target.Node
	switch {
	case n < 0 || n >= t.Nodes():
		return no
	case a.Fault == Slow || Silent(a.Fault) && len(t.Spares) == 0:
		return no // slow is not lost; a silent node with no spare
	}
	return recovers(prog, a, policy, phase)
}

// Event is a failure in the state log.
type Event struct {
	Index  uint64
	Time   time.Time
	Detail string
}

// ReplicaState is one replica's state at the end.
type ReplicaState struct {
	Node   string
	Digest string // hex; empty when Err
	Err    string
	// NeverJoined: the log was written by the front-end's replica alone
	// (a group of one) and this replica agent's log is empty. A job that
	// ends before its group formed does that and leaves the replica
	// agents' files empty (docs/state.md, "Three or five replicas"):
	// such a replica is not compared. One that joined is, empty or not.
	NeverJoined bool
}

// Outcome is what the runner observed once a trial was over.
type Outcome struct {
	// State is the job's state from its log: finished, unfinished or
	// running (files still locked), or "" when no log could be read.
	State    string
	ExitCode int
	Message  string
	// Failures are the log's failure events; EndIndex is the log index
	// of its job-end event (0: none).
	Failures []Event
	EndIndex uint64
	// Versions are the (epoch, node-table version) pairs of the log's
	// events in log order.
	Versions [][2]uint64
	// Left lists the job's processes still alive after the cleanup bound.
	Left []string
	// Replicas are every replica's digest.
	Replicas []ReplicaState
	// StateProblems are raftstore's invariant violations and read problems.
	StateProblems []string
	// Lines is the job's output, labeled "[R] " per rank, from the
	// front-end's stdout and a successor's output files; checked for
	// duplicates only when OutputUnique (the built-in application writes
	// every line once).
	Lines        []string
	OutputUnique bool
	// AppOK says the application's result was verified (its final line);
	// checked when the job completed and AppChecked.
	AppOK, AppChecked bool
	// Recoveries are the log's recoveries (failures paired with their
	// phases), with how each ended.
	Recoveries []Recovery
	// Stale is what each agent that could come back (stopped, or cut
	// off) left of its incarnation.
	Stale []Stale
	// Spans are the incarnations of the ranks as their agents (and the
	// fences) recorded them (launch/fence's rank times), with the ends
	// the faults caused (a killed agent's or host's ranks died with it).
	Spans []RankSpan
}

// RankSpan is one incarnation of one rank: started on Node at Start,
// ended at End (zero: no end recorded).
type RankSpan struct {
	Rank       int
	Inc        uint64
	Node       string
	Start, End time.Time
}

// SpansOf turns the rank times the agents and fences recorded into one
// span per rank incarnation and node: its first start, its last end (the
// last of its processes; zero if none was recorded).
func SpansOf(times []fence.RankTime) []RankSpan {
	type key struct {
		rank int
		inc  uint64
		node string
	}
	at := map[key]int{}
	var spans []RankSpan
	for _, rt := range times {
		k := key{rt.Rank, rt.Inc, rt.Node}
		i, ok := at[k]
		if !ok {
			i = len(spans)
			at[k] = i
			spans = append(spans, RankSpan{Rank: rt.Rank, Inc: rt.Inc, Node: rt.Node})
		}
		sp := &spans[i]
		switch {
		case rt.Start && (sp.Start.IsZero() || rt.Time.Before(sp.Start)):
			sp.Start = rt.Time
		case !rt.Start && rt.Time.After(sp.End):
			sp.End = rt.Time
		}
	}
	return spans
}

// Overlap returns the first pair of incarnations of a rank that ran at
// once: a later incarnation started before an earlier one ended ("" if
// none). A span whose end nobody recorded is not judged.
func Overlap(spans []RankSpan) string {
	var why string
	eachSuccessor(spans, func(r int, old, nw RankSpan) bool {
		if nw.Start.Before(old.End) {
			why = fmt.Sprintf("rank %d: incarnation %d started on %s %v before incarnation %d on %s ended",
				r, nw.Inc, nw.Node, old.End.Sub(nw.Start).Round(time.Millisecond), old.Inc, old.Node)
			return false
		}
		return true
	})
	return why
}

// eachSuccessor calls f, rank by rank in ascending order, for every
// incarnation of a rank that ended (old) and every later one of the same
// rank that started (nw), until f returns false.
func eachSuccessor(spans []RankSpan, f func(rank int, old, nw RankSpan) bool) {
	byRank := map[int][]RankSpan{}
	for _, sp := range spans {
		byRank[sp.Rank] = append(byRank[sp.Rank], sp)
	}
	for _, r := range slices.Sorted(maps.Keys(byRank)) {
		for _, old := range byRank[r] {
			if old.End.IsZero() {
				continue
			}
			for _, nw := range byRank[r] {
				if nw.Inc > old.Inc && !nw.Start.IsZero() && !f(r, old, nw) {
					return
				}
			}
		}
	}
}

// ClosestReplacement returns, over every rank that ran more than one
// incarnation, the shortest time from an incarnation's end to the start
// of the next one (negative: they overlapped, which Overlap reports), the
// rank it was, and whether there was any replacement at all: how close
// the fence (or the self-fence) came to the replacement's start.
func ClosestReplacement(spans []RankSpan) (gap time.Duration, rank int, ok bool) {
	eachSuccessor(spans, func(r int, old, nw RankSpan) bool {
		if d := nw.Start.Sub(old.End); nw.Inc == old.Inc+1 && (!ok || d < gap) {
			gap, rank, ok = d, r, true
		}
		return true
	})
	return gap, rank, ok
}

// Stale is one agent incarnation that was stopped or cut off: it cannot
// act while the fault lasts, may have been declared lost and replaced,
// and comes back (SIGCONT, a healed link) with its ranks still running
// in sessions of their own. Its processes are the agent and the ranks
// it ran when the fault fell (docs/recovery.md, "Fencing").
type Stale struct {
	Node  string
	Fault Fault
	// Lost: the state log has a failure naming the node (declared lost).
	Lost bool
	// Answers: the node answers its spawner (a stopped agent, not a host
	// cut off), so the root fences it from outside before the job's end
	// is reported.
	Answers bool
	// AtEnd lists its processes still up when the job ended.
	AtEnd []string
	// Back: it was continued or its link healed; Left lists its processes
	// still up StaleBound after that.
	Back bool
	Left []string
	// Limit: its processes may outlive the bound by a documented limit
	// (an orphan of a replicated job that ended asks for adoption for
	// 30 s); the runner notes it instead (--strict: not set).
	Limit bool
}

// StaleBound is how long an agent that comes back after it was declared
// lost, and its ranks, may live on (issue #14: "gone within 1 s"; the
// harness polls every 20 ms on a shared machine).
const StaleBound = 2 * time.Second

// Recovery is one recovery in the log.
type Recovery struct {
	Subject string // "rank 5", "node node3"
	Outcome string // as journal.Analyze has it: resumed, restarted, in progress, ...
	Done    bool   // it ran to its end: every rank runs again
	TotalMS float64
}

// The invariants, in the order they are checked and reported.
const (
	InvStatus     = "status"             // the final status is one the policy promises, naming the fault
	InvNoLeft     = "no-process-left"    // no process of the job outlives the cleanup bound
	InvStale      = "old-incarnation"    // nothing of a lost agent incarnation outlives the job's end (fenced) or its return
	InvApart      = "incarnations-apart" // no two incarnations of a rank ran at once (the agents' own start and end times)
	InvPaired     = "failure-paired"     // every failure in the log is followed by the job's end
	InvDigests    = "replica-digests"    // every live replica applied the same log
	InvMonotonic  = "monotonic"          // epochs and node-table versions never go back
	InvState      = "state-invariants"   // raftstore's own checks of the state
	InvOutput     = "output-unique"      // no output line duplicated
	InvRecovered  = "recovered"          // under a restart policy, every failure of a completed job was recovered
	InvAppResult  = "app-result"         // a completed job's application verified its result
	InvFaultFired = "fault-applied"      // at least one planned fault was applied
)

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	Detail    string
}

func (v Violation) String() string { return v.Invariant + ": " + v.Detail }

// Names reports whether msg names one of names as a whole word ("node1"
// is not named by "node10", nor "rank 1" by "rank 12").
func Names(msg string, names []string) bool {
	for _, n := range names {
		if regexp.MustCompile(`(^|[^\w])` + regexp.QuoteMeta(n) + `($|[^\w])`).MatchString(msg) {
			return true
		}
	}
	return false
}

// PeersEndedFirst says whether the ranks started again in spans (an
// incarnation above 1) started only after every other rank had ended: a
// restarted rank then has no peer to rejoin.
func PeersEndedFirst(spans []RankSpan) bool {
	restarted := map[int]bool{}
	var first time.Time
	for _, s := range spans {
		if s.Inc > 1 {
			restarted[s.Rank] = true
			if first.IsZero() || s.Start.Before(first) {
				first = s.Start
			}
		}
	}
	others := 0
	for _, s := range spans {
		if restarted[s.Rank] {
			continue
		}
		others++
		if s.End.IsZero() || s.End.After(first) {
			return false
		}
	}
	return len(restarted) > 0 && others > 0
}

// Check returns the violated invariants, the first one first (the order
// of the Inv constants).
func Check(applied []Applied, e Expectation, o Outcome) []Violation {
	var vs []Violation
	add := func(inv, format string, args ...any) {
		vs = append(vs, Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	fired := false
	for _, a := range applied {
		fired = fired || (a.Skipped == "" && !a.Time.IsZero())
	}

	// The final status.
	got := Ending("")
	switch {
	case o.State == "finished" && o.ExitCode == 0:
		got = Completed
	case o.State == "finished":
		got = Failed
	case o.State == "unfinished":
		got = Unfinished
	}
	switch {
	case got == "":
		add(InvStatus, "the job has no final state (state %q): want %s", o.State, joinEndings(e.Endings))
	case got == Failed && e.Recover && PeersEndedFirst(o.Spans):
		// A loss recovered too late: the planner started the lost ranks
		// again, but every other rank had ended by then (the loss reached
		// the root after the others' last collective), so the new
		// incarnations had no peer to rejoin and their first collective
		// was stranded. No launcher can finish such a job under --restart
		// rank; failing it is the promise (docs/chaos.md, "A loss
		// detected after the others ended").
	case !slices.Contains(e.Endings, got):
		add(InvStatus, "want %s, got %s (exit code %d: %s)", joinEndings(e.Endings), describe(o), o.ExitCode, o.Message)
	case got == Failed && !Names(o.Message, e.Names):
		add(InvStatus, "the final status %q does not name the fault (%s)", o.Message, strings.Join(e.Names, " or "))
	}
	if len(o.Left) > 0 {
		add(InvNoLeft, "%d process(es) of the job left: %s", len(o.Left), strings.Join(o.Left, "; "))
	}
	for _, st := range o.Stale {
		switch {
		case st.Lost && st.Answers && len(st.AtEnd) > 0:
			add(InvStale, "%s (%s) was declared lost and its node answers, yet %d process(es) of that incarnation were up when the job ended (not fenced): %s",
				st.Node, st.Fault, len(st.AtEnd), strings.Join(st.AtEnd, "; "))
		case st.Back && len(st.Left) > 0 && !st.Limit:
			add(InvStale, "%s (%s): %d process(es) of the incarnation that came back still up %v after it ran again: %s",
				st.Node, st.Fault, len(st.Left), StaleBound, strings.Join(st.Left, "; "))
		default:
			continue
		}
		break
	}
	if ov := Overlap(o.Spans); ov != "" {
		add(InvApart, "%s", ov)
	}
	// Every failure paired with the job's end; a failed job has one.
	switch {
	case o.State == "finished":
		if o.EndIndex == 0 {
			add(InvPaired, "the job finished with no job-end event in its log")
		}
		for _, f := range o.Failures {
			if f.Index > o.EndIndex {
				add(InvPaired, "failure at log index %d after the job's end (%d): %s", f.Index, o.EndIndex, f.Detail)
				break
			}
		}
		if got == Failed && len(o.Failures) == 0 {
			add(InvPaired, "the job failed with no failure in its log")
		}
	case o.State == "unfinished" && !e.RootLost && !e.NoMajority && len(o.Failures) > 0:
		add(InvPaired, "failure %q never paired with the job's end: the log has no final status", o.Failures[0].Detail)
	}
	// Digests of the replicas that stayed up. A group that lost its
	// majority (the job unfinished for it) is not compared: its leader
	// appended entries (the final status) that no majority took and that
	// the others never got, and a replica reads its whole log, committed
	// or not (make chaos 2026-11-28: a replica agent stopped before every
	// replica agent had joined; the front-end's replica ended in term 3
	// with 8 entries, the two replica agents' in term 2, alike).
	noMajority := got == Unfinished && e.NoMajority
	var ref ReplicaState
	for _, r := range o.Replicas {
		if slices.Contains(e.Lost, r.Node) || r.NeverJoined || noMajority {
			continue
		}
		if r.Err != "" {
			add(InvDigests, "replica %s unreadable: %s", r.Node, r.Err)
			break
		}
		if ref.Node == "" {
			ref = r
			continue
		}
		if r.Digest != ref.Digest {
			add(InvDigests, "replica %s digest %.12s differs from %s's %.12s", r.Node, r.Digest, ref.Node, ref.Digest)
			break
		}
	}
	for i := 1; i < len(o.Versions); i++ {
		p, c := o.Versions[i-1], o.Versions[i]
		if c[0] < p[0] || c[0] == p[0] && c[1] < p[1] {
			add(InvMonotonic, "event %d: (epoch %d, table version %d) after (%d, %d)", i, c[0], c[1], p[0], p[1])
			break
		}
	}
	problems := o.StateProblems
	if got == Unfinished && (e.NoMajority || e.RootLost) {
		// The failure could not be paired with an end nobody could commit:
		// the group had no majority, or the root was lost with no replica
		// to take over, maybe in the middle of a recovery (--when recovery:
		// the log ends at the recovery's phase).
		problems = slices.DeleteFunc(slices.Clone(problems), func(p string) bool {
			return strings.Contains(p, "has no recovery and the job has not ended")
		})
	}
	if len(problems) > 0 {
		add(InvState, "%s", strings.Join(problems, "; "))
	}
	if o.OutputUnique {
		seen := map[string]bool{}
		for _, l := range o.Lines {
			if seen[l] {
				add(InvOutput, "line %q written twice", l)
				break
			}
			seen[l] = true
		}
	}
	if got == Completed && e.Recover {
		switch {
		case len(o.Recoveries) == 0:
			add(InvRecovered, "the job completed, but its log has no recovery of the %d failure(s) in it", len(o.Failures))
		default:
			for _, r := range o.Recoveries {
				if !r.Done {
					add(InvRecovered, "the recovery of %s did not run to its end: %s", r.Subject, r.Outcome)
					break
				}
			}
		}
	}
	if got == Completed && o.AppChecked && !o.AppOK {
		add(InvAppResult, "the job completed but the application did not verify its result")
	}
	if !fired {
		add(InvFaultFired, "no planned fault was applied: %s", skipped(applied))
	}
	return vs
}

func describe(o Outcome) string {
	switch {
	case o.State == "finished" && o.ExitCode == 0:
		return string(Completed)
	case o.State == "finished":
		return string(Failed)
	}
	return o.State
}

func joinEndings(es []Ending) string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = string(e)
	}
	return strings.Join(s, " or ")
}

func skipped(applied []Applied) string {
	var s []string
	for _, a := range applied {
		s = append(s, a.Action.String()+": "+a.Skipped)
	}
	return strings.Join(s, "; ")
}
