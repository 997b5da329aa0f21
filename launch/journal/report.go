package journal

// report.go is over 700 lines on purpose: it is the one reader of a state
// log for people (inspect's text and JSON, status), whose sections share
// its row and phase helpers; cut by section it would scatter them.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Report is a job's state read back: what `ftlaunch inspect --json`
// prints (with the raft metadata beside it). Times are absolute; the
// *_ms fields are milliseconds since the job's start.
type Report struct {
	Job     Job          `json:"job"`
	Status  ReportStatus `json:"status"`
	Version uint64       `json:"table_version"`
	Epoch   uint64       `json:"epoch"`
	// RecoveryEpoch is the epoch of the last recovery phase committed (0:
	// none), its commands' (raftstore.Recovery.Epoch).
	RecoveryEpoch uint64     `json:"recovery_epoch,omitempty"`
	Leader        string     `json:"leader,omitempty"`
	Plan          ReportPlan `json:"plan"`
	Phases        []Phase    `json:"phases"`
	// Agents are ordered by tree level, then by their order in the plan.
	Agents []AgentTimeline `json:"agents"`
	// Marks are failures and recovery steps about no agent (the job's).
	Marks  []Mark        `json:"marks,omitempty"`
	Events []ReportEvent `json:"events"`
	// Recoveries are the failures, in log order, each with the phases of
	// the restart protocol that recovered it.
	Recoveries []Recovery   `json:"recoveries"`
	Ranks      []ReportRank `json:"ranks"`
	// Model is the launch-time model's prediction beside the launch's
	// measurement (nil: neither recorded, as for test nodes' single
	// local agent).
	Model *ReportModel `json:"model,omitempty"`
	// Collectives are the totals of each kind of collective the root
	// that ended the job answered (nil: none recorded).
	Collectives []CollTotal `json:"collectives,omitempty"`
	// Stranded are the collectives found stranded: ranks ended without
	// joining one that others waited in (the job ends for it).
	Stranded []Stranded `json:"stranded_collectives,omitempty"`
	// Invariants lists violated invariants (raftstore.CheckInvariants);
	// empty when the state is consistent.
	Invariants []string `json:"invariant_violations,omitempty"`
}

// Nodes counts the job's nodes as it stands: every agent's but those
// lost without ranks (a spare took their place), as many as the root had
// while the job ran.
func (r *Report) Nodes() int {
	n := 0
	for _, a := range r.Agents {
		if !a.Lost {
			n++
		}
	}
	return n
}

// ReportStatus is the job's final status.
type ReportStatus struct {
	Done     bool      `json:"done"`
	ExitCode int       `json:"exit_code"`
	Message  string    `json:"message,omitempty"`
	End      time.Time `json:"end,omitzero"`
	EndMS    float64   `json:"end_ms,omitempty"`
}

// ReportPlan is the launch tree.
type ReportPlan struct {
	Kind     string       `json:"kind,omitempty"`
	Root     string       `json:"root,omitempty"`
	Nodes    []ReportNode `json:"nodes"`
	Replicas []string     `json:"replicas,omitempty"`
}

// ReportNode is a node of the plan; Level is its depth (the root's is 0).
type ReportNode struct {
	Name    string `json:"name"`
	Primary string `json:"primary,omitempty"`
	Backup  string `json:"backup,omitempty"`
	Level   int    `json:"level"`
}

// Phase is a stretch of the job between two milestones.
type Phase struct {
	Name     string    `json:"name"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	StartMS  float64   `json:"start_ms"`
	Duration float64   `json:"duration_ms"`
}

// AgentTimeline is one agent's launch, as its events tell it. Zero times
// are unknown (a local agent has no SSH step).
type AgentTimeline struct {
	Node        string    `json:"node"`
	Addr        string    `json:"addr,omitempty"`
	Level       int       `json:"level"`
	Primary     string    `json:"primary,omitempty"`
	Backup      string    `json:"backup,omitempty"`
	Incarnation uint64    `json:"incarnation"`
	Ranks       int       `json:"ranks"`
	Launch      time.Time `json:"launch,omitzero"`
	SSHUp       time.Time `json:"ssh_up,omitzero"`
	Up          time.Time `json:"up,omitzero"`
	// RanksUp is when the node's ranks were first started; ranks started
	// again by a recovery are in RanksRestarted.
	RanksUp        time.Time   `json:"ranks_started,omitzero"`
	RanksRestarted []time.Time `json:"ranks_restarted,omitempty"`
	// Relaunched are when the launches of the node's later agent
	// incarnations began (Launch, SSHUp and Up are its first's).
	Relaunched []time.Time `json:"relaunched,omitempty"`
	// Lost says that the node's agent was declared lost and none of the
	// job's ranks runs there any more: they run on another node (a
	// spare's), or the job ended with them.
	Lost     bool      `json:"lost,omitempty"`
	LastExit time.Time `json:"last_exit,omitzero"`
	// Rem and Seq are its launch's sample of the model's parameters
	// (seconds; AgentSample), when the launch recorded them.
	Rem   float64 `json:"rem_seconds,omitempty"`
	Seq   float64 `json:"seq_seconds,omitempty"`
	Marks []Mark  `json:"marks,omitempty"`
}

// Mark is a failure or recovery event on the timeline.
type Mark struct {
	Time   time.Time `json:"time"`
	AtMS   float64   `json:"at_ms"`
	Kind   string    `json:"kind"`
	Rank   int       `json:"rank"`
	Detail string    `json:"detail"`
}

// ReportEvent is one event of the log, in log order.
type ReportEvent struct {
	Time        time.Time `json:"time"`
	AtMS        float64   `json:"at_ms"`
	Kind        string    `json:"kind"`
	Step        string    `json:"step,omitempty"`
	Node        string    `json:"node,omitempty"`
	Rank        int       `json:"rank"` // -1: not about one rank
	Incarnation uint64    `json:"incarnation,omitempty"`
	Detail      string    `json:"detail"`
	Index       uint64    `json:"index"`
	Term        uint64    `json:"term"`
	Epoch       uint64    `json:"epoch"`
	Version     uint64    `json:"table_version"`
}

// ReportRank is one row of the node table and the events about it.
type ReportRank struct {
	Rank        int    `json:"rank"`
	Node        string `json:"node"`
	PID         int    `json:"pid,omitempty"`
	ITuple      string `json:"ituple,omitempty"`     // when it is printable text
	ITupleBytes []byte `json:"ituple_b64,omitempty"` // otherwise, base64
	Incarnation uint64 `json:"incarnation"`
	State       string `json:"state"`
	ExitCode    int    `json:"exit_code"`
	// History lists the events about this rank (failures, recoveries,
	// unclean exits); a rank that ran once and exited 0 has none.
	History []ReportEvent `json:"history,omitempty"`
	// Incarnations are the rank's runs, from its first start: one for a
	// rank that was never started again.
	Incarnations []RankIncarnation `json:"incarnations"`
}

// RankIncarnation is one run of a rank, from its start to its end, as the
// events tell it (zero times: not recorded).
type RankIncarnation struct {
	Incarnation uint64    `json:"incarnation"`
	Node        string    `json:"node,omitempty"`
	Started     time.Time `json:"started,omitzero"`
	StartedMS   float64   `json:"started_ms,omitempty"`
	Ended       time.Time `json:"ended,omitzero"`
	EndedMS     float64   `json:"ended_ms,omitempty"`
	// End is how it ended, as its exit event says ("killed by signal 9
	// (exit code 137)"); Shared, that the event was about several ranks
	// of its node that ended alike.
	End    string `json:"end,omitempty"`
	Shared bool   `json:"end_shared,omitempty"`
	// Failure is the failure declared for it, if one was.
	Failure string `json:"failure,omitempty"`
}

// Outcomes of a Recovery.
const (
	// OutcomeResumed: every rank went on (the "resumed" phase).
	OutcomeResumed = "resumed"
	// OutcomeRestarted: every rank was started again (--restart job's
	// "restarted" phase).
	OutcomeRestarted = "restarted"
	// OutcomeRecovered: the rank runs again (resume was sent), but not
	// every agent acknowledged the resume.
	OutcomeRecovered = "recovered"
	// OutcomeInProgress: the log ends during the recovery, and the job did
	// not end (it runs, or its root stopped there).
	OutcomeInProgress = "in progress"
	// OutcomeNotRecovered: the job ended before the failure was recovered
	// (or the failure is the job's own, which ends it).
	OutcomeNotRecovered = "not recovered"
)

// Recovery is one failure and what the root did about it: the phases of
// the restart protocol that recovered it (several failures recovered
// together share them).
type Recovery struct {
	Failure     ReportEvent `json:"failure"`
	Rank        int         `json:"rank"` // -1: a node's failure, or the job's
	Node        string      `json:"node,omitempty"`
	Incarnation uint64      `json:"incarnation,omitempty"` // the one that failed
	// NewIncarnation is the incarnation the rank runs as afterwards.
	NewIncarnation uint64 `json:"new_incarnation,omitempty"`
	// Restarted is when the rank (its node's ranks) started again.
	Restarted   time.Time `json:"restarted,omitzero"`
	RestartedMS float64   `json:"restarted_ms,omitempty"`
	// Phases are the phases, in log order; the last is "resumed" or
	// "restarted" once the recovery is over.
	Phases []RecoveryStep `json:"phases"`
	// Repeats are further reports of the same subject's failure while
	// this one was open (a respawned rank failing again, say).
	Repeats []ReportEvent `json:"repeats,omitempty"`
	Outcome string        `json:"outcome"` // one of the Outcome constants
	// End is when the recovery was over (resumed, restarted or
	// recovered); TotalMS, how long after the failure.
	End     time.Time `json:"end,omitzero"`
	EndMS   float64   `json:"end_ms,omitempty"`
	TotalMS float64   `json:"total_ms,omitempty"`
}

// RecoveryStep is one phase of a recovery. DurationMS runs until the next
// phase of the same recovery; for the last phase of a recovery that is
// not over, until the job's end (Open, not recovered) or 0 (Open, in
// progress).
type RecoveryStep struct {
	Stage      string    `json:"stage"` // suspend, respawn, patch, resume, resumed, restart-job, restarted
	Epoch      uint64    `json:"epoch"`
	Time       time.Time `json:"time"`
	AtMS       float64   `json:"at_ms"`     // since the job's start
	OffsetMS   float64   `json:"offset_ms"` // since the failure
	DurationMS float64   `json:"duration_ms"`
	Open       bool      `json:"open,omitempty"`
	Detail     string    `json:"detail"`
	Index      uint64    `json:"index"`
	// Fenced is, for a stage that starts ranks again (respawn,
	// restart-job), how the fence of each lost node was confirmed:
	// "fenced" (the fence reached it) or "self-fenced" (it did not answer;
	// its agent killed its ranks once cut off: docs/recovery.md,
	// "Fencing").
	Fenced []FenceNote `json:"fenced,omitempty"`
}

// FenceNote is how a lost node's fence was confirmed.
type FenceNote struct {
	Node string `json:"node"`
	How  string `json:"how"`
}

// FencedPrefix starts the part of a recovery phase's detail that names how
// each fence was confirmed ("fenced: node5 self-fenced, node2 fenced").
const FencedPrefix = "fenced: "

// fencedOf reads the fences a phase's detail names (FencedPrefix).
func fencedOf(detail string) []FenceNote {
	_, list, ok := strings.Cut(detail, FencedPrefix)
	if !ok {
		return nil
	}
	var out []FenceNote
	for item := range strings.SplitSeq(list, ", ") {
		if node, how, ok := strings.Cut(strings.TrimSpace(item), " "); ok {
			out = append(out, FenceNote{Node: node, How: how})
		}
	}
	return out
}

// Over reports whether the recovery is over: the failed rank runs again.
func (r *Recovery) Over() bool {
	switch r.Outcome {
	case OutcomeResumed, OutcomeRestarted, OutcomeRecovered:
		return true
	}
	return false
}

// Stage returns the phase a recovery stands at (its last), or "".
func (r *Recovery) Stage() *RecoveryStep {
	if len(r.Phases) == 0 {
		return nil
	}
	return &r.Phases[len(r.Phases)-1]
}

// Analyze turns a job's state into a report. It accepts any state, even
// one not written by this package (the job spec then stays empty).
func Analyze(s *raftstore.State) *Report {
	rep := &Report{Version: s.Version, Epoch: s.Epoch, Leader: s.Leader}
	if s.Recovery != nil {
		rep.RecoveryEpoch = s.Recovery.Epoch
	}
	if job, err := DecodeJob(s.Job.Spec); err == nil {
		rep.Job = job
	}
	rep.Job.ID, rep.Job.N = s.Job.ID, s.Job.Size
	start := rep.Job.Start
	if start.IsZero() && len(s.Events) > 0 {
		start = s.Events[0].Time
	}
	at := func(t time.Time) float64 {
		if t.IsZero() || start.IsZero() {
			return 0
		}
		return float64(t.Sub(start).Microseconds()) / 1000
	}
	rep.Status = ReportStatus{Done: s.Status.Done, ExitCode: s.Status.ExitCode, Message: s.Status.Message}

	// The plan, with levels.
	parent := map[string]string{}
	for _, n := range s.Plan.Nodes {
		parent[n.Name] = n.Primary
	}
	level := func(name string) int {
		l := 0
		for p := parent[name]; p != "" && l <= len(parent); p = parent[p] {
			l++
		}
		return l
	}
	rep.Plan.Replicas = s.Plan.Replicas
	rep.Plan.Nodes = []ReportNode{}
	for _, n := range s.Plan.Nodes {
		rep.Plan.Nodes = append(rep.Plan.Nodes, ReportNode{Name: n.Name, Primary: n.Primary, Backup: n.Backup, Level: level(n.Name)})
		if n.Primary == "" && rep.Plan.Root == "" {
			rep.Plan.Root = n.Name
		}
	}

	// Agents: the plan's nodes below the root, then any others named.
	agents := map[string]*AgentTimeline{}
	var order []*AgentTimeline
	agent := func(name string) *AgentTimeline {
		if name == "" || name == rep.Plan.Root {
			return nil
		}
		a := agents[name]
		if a == nil {
			a = &AgentTimeline{Node: name, Level: level(name)}
			if _, ok := parent[name]; !ok {
				a.Level = 1
			}
			agents[name] = a
			order = append(order, a)
		}
		return a
	}
	for _, n := range s.Plan.Nodes {
		if a := agent(n.Name); a != nil {
			a.Primary, a.Backup = n.Primary, n.Backup
		}
	}
	names := make([]string, 0, len(s.Agents))
	for n := range s.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if a := agent(n); a != nil {
			a.Addr, a.Incarnation = s.Agents[n].Addr, s.Agents[n].Incarnation
		}
	}
	// Each rank's runs, from the events; a row that lost its node (a
	// root that took over without it) takes the node its last start names.
	incs := incarnations(s, at)
	rowNode := func(r int) string {
		if n := s.Ranks[r].Node; n != "" {
			return n
		}
		if h := incs[r]; len(h) > 0 {
			return h[len(h)-1].Node
		}
		return ""
	}
	for i := range s.Ranks {
		if a := agent(rowNode(i)); a != nil {
			a.Ranks++
		}
	}

	// Events. The launch's milestones are each node's first: a rank
	// started again by a recovery starts no launch phase.
	byRank := map[int][]ReportEvent{}
	nodeExit := map[string]ReportEvent{} // a node's first event of ranks that ended together
	var milestones struct{ up, ranks, table, end time.Time }
	later := func(t *time.Time, u time.Time) {
		if u.After(*t) {
			*t = u
		}
	}
	// nodeUp: whether a node's first agent was the launch's; nodeRanks:
	// how many recovery steps the log had at a node's last start of ranks.
	nodeUp, nodeRanks := map[string]bool{}, map[string]int{}
	recoverySteps := 0
	rep.Events = make([]ReportEvent, 0, len(s.Events))
	for i := range s.Events {
		ev := &s.Events[i]
		step, _ := Step(ev)
		re := ReportEvent{Time: ev.Time, AtMS: at(ev.Time), Kind: ev.Kind.String(), Node: ev.Node, Rank: ev.Rank,
			Incarnation: ev.Incarnation, Detail: ev.Detail, Index: ev.Index, Term: ev.Term, Epoch: ev.Epoch, Version: ev.Version}
		if ev.Kind == raftstore.EventLaunch || ev.Kind == raftstore.EventExit {
			re.Step = step
		}
		rep.Events = append(rep.Events, re)
		if ev.Kind == raftstore.EventRecovery {
			recoverySteps++
		}
		if ev.Rank != raftstore.NoRank {
			byRank[ev.Rank] = append(byRank[ev.Rank], re)
		} else if ev.Kind == raftstore.EventExit && ev.Node != "" {
			if _, ok := nodeExit[ev.Node]; !ok {
				nodeExit[ev.Node] = re // the first: a node's failed ranks end together
			}
		}
		if analyzeModel(rep, ev) || analyzeCollectives(rep, ev) || analyzeStranded(rep, ev) {
			continue
		}
		a := agent(ev.Node)
		switch ev.Kind {
		case raftstore.EventLaunch:
			switch step {
			case StepPlan:
				// The first plan's kind; a plan recorded again says what
				// changed ("changed: ..."), in the same tree.
				if _, text := Step(ev); !strings.HasPrefix(text, "changed: ") {
					rep.Plan.Kind, _, _ = strings.Cut(text, " ")
				}
			case StepTable:
				if milestones.table.IsZero() { // the launch's, not a restarted job's
					milestones.table = ev.Time
				}
			case StepUp:
				if _, ok := nodeUp[ev.Node]; !ok {
					// A node whose first agent is a later incarnation (a
					// spare, started by a recovery) is not the launch's.
					nodeUp[ev.Node] = ev.Incarnation <= 1
					if nodeUp[ev.Node] {
						later(&milestones.up, ev.Time)
					}
				}
			case StepRanks:
				last, started := nodeRanks[ev.Node]
				switch {
				case !started:
					if launched, ok := nodeUp[ev.Node]; launched || !ok {
						later(&milestones.ranks, ev.Time)
					}
				case last != recoverySteps && a != nil:
					// Ranks started with no recovery step between are
					// one start (a node's ranks reported one by one).
					a.RanksRestarted = append(a.RanksRestarted, ev.Time)
				}
				nodeRanks[ev.Node] = recoverySteps
			}
			if a == nil {
				break
			}
			switch step {
			case StepLaunch:
				// The first launch's; a later incarnation's is a relaunch.
				if a.Launch.IsZero() {
					a.Launch = ev.Time
				} else {
					a.Relaunched = append(a.Relaunched, ev.Time)
				}
			case StepSSH, StepStart:
				if a.SSHUp.IsZero() {
					a.SSHUp = ev.Time
				}
			case StepUp:
				if a.Up.IsZero() {
					a.Up = ev.Time
				}
			case StepRanks:
				if a.RanksUp.IsZero() {
					a.RanksUp = ev.Time
				}
			}
		case raftstore.EventExit:
			if a != nil {
				later(&a.LastExit, ev.Time)
			}
		case raftstore.EventFailure, raftstore.EventRecovery, raftstore.EventRecovered, raftstore.EventLeader:
			m := Mark{Time: ev.Time, AtMS: at(ev.Time), Kind: ev.Kind.String(), Rank: ev.Rank, Detail: ev.Detail}
			if a != nil {
				a.Marks = append(a.Marks, m)
			} else {
				rep.Marks = append(rep.Marks, m)
			}
		case raftstore.EventJobEnd:
			milestones.end = ev.Time
			rep.Status.End, rep.Status.EndMS = ev.Time, at(ev.Time)
		}
	}
	if rep.Model != nil {
		for _, s := range rep.Model.Agents {
			if a := agents[s.Node]; a != nil {
				a.Rem, a.Seq = s.Rem, s.Seq
			}
		}
	}
	for _, a := range order {
		if _, planned := parent[a.Node]; !planned && rep.Plan.Root != "" {
			// Not in the plan: a spare's agent, which the root started
			// for a lost node's ranks (a child of the root).
			a.Primary = rep.Plan.Root
		}
		a.Lost = a.Ranks == 0 && slices.ContainsFunc(s.Events, func(ev raftstore.Event) bool {
			return ev.Kind == raftstore.EventFailure && ev.Rank == raftstore.NoRank && ev.Node == a.Node
		})
	}
	slices.SortStableFunc(order, func(a, b *AgentTimeline) int { return cmp.Compare(a.Level, b.Level) })
	rep.Agents = make([]AgentTimeline, 0, len(order))
	for _, a := range order {
		rep.Agents = append(rep.Agents, *a)
	}

	// Phases between milestones; a missing milestone is skipped.
	prev := start
	for _, p := range []struct {
		name string
		end  time.Time
	}{
		{"launch agents", milestones.up},
		{"start ranks", milestones.ranks},
		{"exchange node table", milestones.table},
		{"run", milestones.end},
	} {
		if p.end.IsZero() || prev.IsZero() {
			continue
		}
		end := p.end
		if end.Before(prev) {
			end = prev
		}
		rep.Phases = append(rep.Phases, Phase{Name: p.name, Start: prev, End: end, StartMS: at(prev), Duration: float64(end.Sub(prev).Microseconds()) / 1000})
		prev = end
	}
	if rep.Phases == nil {
		rep.Phases = []Phase{}
	}

	rep.Recoveries = recoveries(s, at, incs)

	rep.Ranks = make([]ReportRank, 0, len(s.Ranks))
	for i := range s.Ranks {
		r := &s.Ranks[i]
		rr := ReportRank{Rank: r.Rank, Node: rowNode(i), PID: r.PID, Incarnation: r.Incarnation, State: r.State.String(), ExitCode: r.ExitCode,
			History: byRank[r.Rank], Incarnations: incs[i]}
		if rr.Incarnations == nil {
			rr.Incarnations = []RankIncarnation{}
		}
		if len(rr.History) == 0 && r.State == raftstore.RankFailed {
			// Its end was recorded with others of its node (one event for
			// a node's ranks lost together): the event is its history.
			h := ReportEvent{Kind: raftstore.EventExit.String(), Node: r.Node, Rank: r.Rank, Incarnation: r.Incarnation,
				Detail: fmt.Sprintf("failed (exit code %d)", r.ExitCode)}
			if ev, ok := nodeExit[r.Node]; ok {
				h.Time, h.AtMS, h.Index, h.Detail = ev.Time, ev.AtMS, ev.Index, ev.Detail
			}
			rr.History = []ReportEvent{h}
		}
		if printable(r.ITuple) {
			rr.ITuple = string(r.ITuple)
		} else {
			rr.ITupleBytes = r.ITuple
		}
		rep.Ranks = append(rep.Ranks, rr)
	}
	if err := s.CheckInvariants(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			rep.Invariants = append(rep.Invariants, line)
		}
	}
	return rep
}

// printable reports whether b is text that prints as itself.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// RankList shows ranks compactly, as the log's events do: "0-7,9".
func RankList(ranks []int) string { return rankList(ranks) }

// parseRankList reads a list of ranks as rankList writes it ("0-7,9"),
// ranks below n only. It stops at anything else (a list cut short with
// "...").
func parseRankList(s string, n int) []int {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 || a >= n {
			break
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b >= n {
				break
			}
		}
		for r := a; r <= b; r++ {
			out = append(out, r)
		}
	}
	return out
}

// startedRanks returns the ranks a StepRanks event started.
func startedRanks(ev *raftstore.Event, n int) []int {
	_, text := Step(ev)
	_, list, ok := strings.Cut(text, "started: ")
	if !ok {
		return nil
	}
	return parseRankList(list, n)
}

// groupExit splits the text of an exit event about several ranks ("3
// rank(s) killed by signal 15 (exit code 143): 0,2-3") into how they
// ended and the ranks.
func groupExit(ev *raftstore.Event, n int) (how string, ranks []int) {
	_, text := Step(ev)
	i := strings.LastIndex(text, ": ")
	if i < 0 {
		return "", nil
	}
	how = text[:i]
	if _, rest, ok := strings.Cut(how, "rank(s) "); ok {
		how = rest
	}
	return how, parseRankList(text[i+2:], n)
}

// phaseOf reads a recovery event: its stage, epoch and the ranks it
// names (its Rank, or the list after "rank(s) ").
func phaseOf(ev *raftstore.Event, n int) (stage string, epoch uint64, ranks []int) {
	stage, text := Step(ev)
	if rest, ok := strings.CutPrefix(text, "epoch "); ok {
		end := strings.IndexFunc(rest, func(c rune) bool { return c < '0' || c > '9' })
		if end < 0 {
			end = len(rest)
		}
		epoch, _ = strconv.ParseUint(rest[:end], 10, 64)
	}
	if ev.Rank >= 0 && ev.Rank < n {
		ranks = []int{ev.Rank}
	}
	if _, list, ok := strings.Cut(text, "rank(s) "); ok {
		list, _, _ = strings.Cut(list, ";") // what follows is not ranks (FencedPrefix)
		for f := range strings.FieldsSeq(strings.ReplaceAll(list, ",", " ")) {
			r, err := strconv.Atoi(f)
			if err != nil || r < 0 || r >= n {
				break
			}
			if !slices.Contains(ranks, r) {
				ranks = append(ranks, r)
			}
		}
	}
	return stage, epoch, ranks
}

// isFailure reports whether ev declares a failure: an EventFailure, or a
// further report of a failure already open (an EventLaunch of
// StepFailure).
func isFailure(ev *raftstore.Event) bool {
	if ev.Kind == raftstore.EventFailure {
		return true
	}
	step, _ := Step(ev)
	return ev.Kind == raftstore.EventLaunch && step == StepFailure
}

// incarnations lists each rank's runs: every start of a rank (its node's
// "ranks started" event) begins its next incarnation; exits and failures
// end them. A rank whose starts were not recorded has one run, the row's.
func incarnations(s *raftstore.State, at func(time.Time) float64) [][]RankIncarnation {
	n := len(s.Ranks)
	incs := make([][]RankIncarnation, n)
	// cur returns rank r's incarnation inc (0: its latest), or nil.
	cur := func(r int, inc uint64) *RankIncarnation {
		h := incs[r]
		if inc == 0 && len(h) > 0 {
			return &h[len(h)-1]
		}
		for i := len(h) - 1; i >= 0; i-- {
			if h[i].Incarnation == inc {
				return &h[i]
			}
		}
		return nil
	}
	end := func(ri *RankIncarnation, ev *raftstore.Event, how string, shared bool) {
		if ri == nil || !ri.Ended.IsZero() {
			return
		}
		ri.Ended, ri.EndedMS, ri.End, ri.Shared = ev.Time, at(ev.Time), how, shared
	}
	for i := range s.Events {
		ev := &s.Events[i]
		step, text := Step(ev)
		switch {
		case ev.Kind == raftstore.EventLaunch && step == StepRanks:
			for _, r := range startedRanks(ev, n) {
				incs[r] = append(incs[r], RankIncarnation{Incarnation: uint64(len(incs[r]) + 1), Node: ev.Node, Started: ev.Time, StartedMS: at(ev.Time)})
			}
		case ev.Kind == raftstore.EventExit && ev.Rank >= 0 && ev.Rank < n:
			end(cur(ev.Rank, ev.Incarnation), ev, text, false)
		case ev.Kind == raftstore.EventExit:
			how, ranks := groupExit(ev, n)
			for _, r := range ranks {
				end(cur(r, 0), ev, how, true)
			}
		case isFailure(ev) && ev.Rank >= 0 && ev.Rank < n:
			if ri := cur(ev.Rank, ev.Incarnation); ri != nil && ri.Failure == "" {
				if step == StepFailure {
					ri.Failure = text
				} else {
					ri.Failure = ev.Detail
				}
			}
		}
	}
	for r := range incs {
		row := &s.Ranks[r]
		if len(incs[r]) == 0 && row.Incarnation > 0 {
			incs[r] = []RankIncarnation{{Incarnation: row.Incarnation, Node: row.Node}}
		}
	}
	return incs
}

// recoveries pairs each failure with the recovery phases that follow it:
// a phase that names ranks belongs to the open failures of those ranks;
// restart-job, to every open failure of a rank; resume and the closing
// phases, to those whose recovery began. "resumed" and "restarted" close
// a recovery; the job's end leaves the open ones not recovered.
func recoveries(s *raftstore.State, at func(time.Time) float64, incs [][]RankIncarnation) []Recovery {
	n := len(s.Ranks)
	recs := []Recovery{}
	var open []int // indices in recs
	openFor := func(ev *raftstore.Event) int {
		for _, i := range open {
			if r := &recs[i]; r.Rank == ev.Rank && (ev.Rank >= 0 || r.Node == ev.Node) {
				return i
			}
		}
		return -1
	}
	closeRec := func(i int, outcome string, t time.Time) {
		r := &recs[i]
		r.Outcome, r.End, r.EndMS, r.TotalMS = outcome, t, at(t), millis(t.Sub(r.Failure.Time))
		open = slices.DeleteFunc(open, func(k int) bool { return k == i })
	}
	event := func(ev *raftstore.Event) ReportEvent {
		return ReportEvent{Time: ev.Time, AtMS: at(ev.Time), Kind: ev.Kind.String(), Node: ev.Node, Rank: ev.Rank,
			Incarnation: ev.Incarnation, Detail: ev.Detail, Index: ev.Index, Term: ev.Term, Epoch: ev.Epoch, Version: ev.Version}
	}
	// lostRanks[k]: the ranks the lost node of recs[k] ran when it failed.
	// A phase names them by rank; after a spare took the node's place
	// (docs/recovery.md, "Spares") the state's rows name the spare.
	lostRanks := map[int][]int{}
	ranAt := func(node string, t time.Time) []int {
		var out []int
		for x := range n {
			where := s.Ranks[x].Node
			for _, ri := range incs[x] {
				if !ri.Started.IsZero() && ri.Started.After(t) {
					break
				}
				where = ri.Node
			}
			if where == node {
				out = append(out, x)
			}
		}
		return out
	}
	var jobEnd time.Time
	for i := range s.Events {
		ev := &s.Events[i]
		switch {
		case isFailure(ev):
			re := event(ev)
			if step, text := Step(ev); step == StepFailure {
				re.Kind, re.Detail = raftstore.EventFailure.String(), text
			}
			if k := openFor(ev); k >= 0 {
				recs[k].Repeats = append(recs[k].Repeats, re)
				continue
			}
			node := ev.Node
			if node == "" && ev.Rank >= 0 && ev.Rank < n {
				node = s.Ranks[ev.Rank].Node
			}
			recs = append(recs, Recovery{Failure: re, Rank: ev.Rank, Node: node, Incarnation: ev.Incarnation, Phases: []RecoveryStep{}, Outcome: OutcomeInProgress})
			open = append(open, len(recs)-1)
			if ev.Rank < 0 && node != "" {
				lostRanks[len(recs)-1] = ranAt(node, ev.Time)
			}
		case ev.Kind == raftstore.EventRecovery:
			stage, epoch, ranks := phaseOf(ev, n)
			step := RecoveryStep{Stage: stage, Epoch: epoch, Time: ev.Time, AtMS: at(ev.Time), Detail: ev.Detail, Index: ev.Index, Fenced: fencedOf(ev.Detail)}
			for _, k := range slices.Clone(open) {
				r := &recs[k]
				if r.Rank < 0 && r.Node == "" {
					continue // the job's own failure: the protocol recovers ranks and agents
				}
				switch {
				case r.Rank < 0 && strings.Contains(ev.Detail, "of node "+r.Node+" "):
					// A lost agent's relaunch names its node.
				case len(ranks) > 0:
					if !slices.ContainsFunc(ranks, func(x int) bool { return x == r.Rank || r.Rank < 0 && slices.Contains(lostRanks[k], x) }) {
						continue
					}
				case stage == "restart-job":
				default:
					if len(r.Phases) == 0 {
						continue
					}
				}
				st := step
				st.OffsetMS = millis(ev.Time.Sub(r.Failure.Time))
				r.Phases = append(r.Phases, st)
				switch stage {
				case "resumed":
					closeRec(k, OutcomeResumed, ev.Time)
				case "restarted":
					closeRec(k, OutcomeRestarted, ev.Time)
				}
			}
		case ev.Kind == raftstore.EventRecovered:
			for _, k := range open {
				if r := &recs[k]; r.Rank == ev.Rank && (ev.Rank >= 0 || r.Node == ev.Node) {
					r.NewIncarnation = ev.Incarnation
					r.End = ev.Time // until "resumed" says more
				}
			}
		case ev.Kind == raftstore.EventJobEnd:
			jobEnd = ev.Time
		}
	}
	for i := range recs {
		r := &recs[i]
		if r.Rank >= 0 && r.Rank < n {
			// The rank's start after its failure, and its incarnation then.
			for _, ri := range incs[r.Rank] {
				if ri.Incarnation > r.Incarnation && !ri.Started.Before(r.Failure.Time) {
					r.Restarted, r.RestartedMS = ri.Started, at(ri.Started)
					if r.NewIncarnation == 0 && r.Over() {
						r.NewIncarnation = ri.Incarnation
					}
					break
				}
			}
		}
		if !r.Over() {
			switch {
			case !r.End.IsZero(): // recovered, but "resumed" was not recorded
				r.Outcome, r.EndMS, r.TotalMS = OutcomeRecovered, at(r.End), millis(r.End.Sub(r.Failure.Time))
			case s.Status.Done, r.Rank < 0 && r.Node == "":
				// The job's own failure (a timeout, a recovery that could
				// not go on) is never recovered: it ends the job.
				r.Outcome = OutcomeNotRecovered
			}
		}
		// Durations: until the next phase; the last, if not the end,
		// until the job's end.
		for k := range r.Phases {
			p := &r.Phases[k]
			switch {
			case k+1 < len(r.Phases):
				p.DurationMS = millis(r.Phases[k+1].Time.Sub(p.Time))
			case p.Stage == "resumed" || p.Stage == "restarted":
			case r.Outcome == OutcomeRecovered:
				p.DurationMS = millis(r.End.Sub(p.Time))
			default:
				p.Open = true
				if !jobEnd.IsZero() {
					p.DurationMS = millis(jobEnd.Sub(p.Time))
				}
			}
		}
	}
	return recs
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
