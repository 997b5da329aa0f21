package journal

import (
	"cmp"
	"fmt"
	"slices"
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
	Leader  string       `json:"leader,omitempty"`
	Plan    ReportPlan   `json:"plan"`
	Phases  []Phase      `json:"phases"`
	// Agents are ordered by tree level, then by their order in the plan.
	Agents []AgentTimeline `json:"agents"`
	// Marks are failures and recovery steps about no agent (the job's).
	Marks  []Mark        `json:"marks,omitempty"`
	Events []ReportEvent `json:"events"`
	Ranks  []ReportRank  `json:"ranks"`
	// Invariants lists violated invariants (raftstore.CheckInvariants);
	// empty when the state is consistent.
	Invariants []string `json:"invariant_violations,omitempty"`
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
	RanksUp     time.Time `json:"ranks_started,omitzero"`
	LastExit    time.Time `json:"last_exit,omitzero"`
	Marks       []Mark    `json:"marks,omitempty"`
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
}

// Analyze turns a job's state into a report. It accepts any state, even
// one not written by this package (the job spec then stays empty).
func Analyze(s *raftstore.State) *Report {
	rep := &Report{Version: s.Version, Epoch: s.Epoch, Leader: s.Leader}
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
	for i := range s.Ranks {
		if a := agent(s.Ranks[i].Node); a != nil {
			a.Ranks++
		}
	}

	// Events.
	byRank := map[int][]ReportEvent{}
	nodeExit := map[string]ReportEvent{} // a node's first event of ranks that ended together
	var milestones struct{ up, ranks, table, end time.Time }
	later := func(t *time.Time, u time.Time) {
		if u.After(*t) {
			*t = u
		}
	}
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
		if ev.Rank != raftstore.NoRank {
			byRank[ev.Rank] = append(byRank[ev.Rank], re)
		} else if ev.Kind == raftstore.EventExit && ev.Node != "" {
			if _, ok := nodeExit[ev.Node]; !ok {
				nodeExit[ev.Node] = re // the first: a node's failed ranks end together
			}
		}
		a := agent(ev.Node)
		switch ev.Kind {
		case raftstore.EventLaunch:
			switch step {
			case StepPlan:
				_, text := Step(ev)
				rep.Plan.Kind, _, _ = strings.Cut(text, " ")
			case StepTable:
				later(&milestones.table, ev.Time)
			}
			if a == nil {
				break
			}
			switch step {
			case StepLaunch:
				a.Launch = ev.Time
			case StepSSH, StepStart:
				a.SSHUp = ev.Time
			case StepUp:
				a.Up = ev.Time
				later(&milestones.up, ev.Time)
			case StepRanks:
				later(&a.RanksUp, ev.Time)
				later(&milestones.ranks, ev.Time)
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

	rep.Ranks = make([]ReportRank, 0, len(s.Ranks))
	for i := range s.Ranks {
		r := &s.Ranks[i]
		rr := ReportRank{Rank: r.Rank, Node: r.Node, PID: r.PID, Incarnation: r.Incarnation, State: r.State.String(), ExitCode: r.ExitCode, History: byRank[r.Rank]}
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
