package raftstore

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"slices"
	"time"
)

// MaxRanks bounds a job's size, so that a bad command cannot make a replica
// allocate an unbounded node table.
const MaxRanks = 1 << 24

// NoRank is Event.Rank for an event that is not about one rank.
const NoRank = -1

// JobSpec is the job as submitted: an identifier, the number of ranks, and
// the launcher's own description of it, opaque to this package.
type JobSpec struct {
	ID   string
	Size int    // number of ranks, 1..MaxRanks
	Spec []byte // opaque to raftstore
}

// PlanNode is one node of the launch tree.
type PlanNode struct {
	Name    string
	Primary string // primary parent ("" for the root)
	Backup  string // backup parent ("" if none)
}

// Plan is the launch tree and the nodes that host root replicas.
type Plan struct {
	Nodes    []PlanNode
	Replicas []string
}

// Agent is the launcher agent on one node.
type Agent struct {
	Node        string
	Addr        string
	Incarnation uint64 // boot incarnation; only grows
}

// RankState is the state of one rank.
type RankState uint8

// Rank states. RankUnknown is the state of a rank nobody has reported yet;
// an update never sets it.
const (
	RankUnknown RankState = iota
	RankStarting
	RankRunning
	RankExited
	RankFailed
	RankSuspended
	rankStateEnd // first invalid value
)

var rankStateNames = [...]string{"unknown", "starting", "running", "exited", "failed", "suspended"}

func (s RankState) String() string {
	if s < rankStateEnd {
		return rankStateNames[s]
	}
	return fmt.Sprintf("RankState(%d)", uint8(s))
}

// terminal reports whether no later state is possible for the same
// incarnation.
func (s RankState) terminal() bool { return s == RankExited || s == RankFailed }

// Rank is one row of the node table. In State.Ranks, Ranks[i].Rank == i.
type Rank struct {
	Rank        int
	Node        string
	PID         int
	ITuple      []byte // where the rank listens; opaque; never modified in place
	Incarnation uint64 // only grows
	State       RankState
	ExitCode    int // meaningful when State is RankExited
}

// Status is the job's final status.
type Status struct {
	Done     bool // set once, by a Finish command
	ExitCode int
	Message  string
}

// EventKind is the type of an Event.
type EventKind uint8

// Event kinds.
const (
	// EventLaunch: a launch step (agent started, subtree reported, table
	// complete...).
	EventLaunch EventKind = iota + 1
	// EventFailure: the root declared a node (Rank == NoRank) or a rank
	// failed; Incarnation is the failed incarnation. It stays open until an
	// EventRecovered for the same node or rank, or the job's end.
	EventFailure
	// EventRecovery: a step of the restart protocol (suspend, respawn,
	// patch, resume), in Detail.
	EventRecovery
	// EventRecovered closes the open failure of the same node or rank;
	// Incarnation is the new, larger incarnation.
	EventRecovered
	// EventExit: a rank exited (Detail may say how).
	EventExit
	// EventLeader: a replica took over as root (Node), with a new epoch.
	// Only a BumpEpoch command with Leader set records it.
	EventLeader
	// EventJobEnd: the job ended. Only a Finish command records it.
	EventJobEnd
	eventKindEnd
)

var eventKindNames = [...]string{"", "launch", "failure", "recovery", "recovered", "exit", "leader", "job-end"}

func (k EventKind) String() string {
	if k > 0 && k < eventKindEnd {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one entry of the job's event log. The root fills Time, Kind,
// Node, Rank, Incarnation and Detail; the FSM fills Index, Term, Epoch and
// Version when it applies the command that carries the event.
type Event struct {
	Time        time.Time // wall clock of the root that decided it
	Kind        EventKind
	Node        string
	Rank        int // NoRank if not about one rank
	Incarnation uint64
	Detail      string

	Index   uint64 // raft log index of the command
	Term    uint64 // raft term of the command
	Epoch   uint64 // recovery epoch after the command
	Version uint64 // table version after the command
}

// Subject identifies what an event is about (a rank, or else a node), for
// matching failures with their recoveries.
type Subject struct {
	Rank int // NoRank for a node
	Node string
}

// Subject is what the event is about.
func (e *Event) Subject() Subject {
	if e.Rank != NoRank {
		return Subject{Rank: e.Rank}
	}
	return Subject{Rank: NoRank, Node: e.Node}
}

func (s Subject) String() string {
	if s.Rank != NoRank {
		return fmt.Sprintf("rank %d", s.Rank)
	}
	return fmt.Sprintf("node %q", s.Node)
}

// State is the replicated root state of one job.
//
// A *State obtained from FSM.View must not be modified or retained after
// the callback returns; one from FSM.Copy belongs to the caller, but its
// byte slices (JobSpec.Spec, Rank.ITuple) are shared with the FSM and must
// not be modified.
type State struct {
	Job    JobSpec
	Plan   Plan
	Agents map[string]Agent // by node name
	Ranks  []Rank           // len(Ranks) == Job.Size once the job is set

	// Version is the table version: 0 before the job is set, 1 after, and
	// one more for every command that changes the plan, the agents or the
	// ranks. It never goes back.
	Version uint64
	// Epoch is the recovery epoch, the only one: BumpEpoch (a takeover)
	// advances it by one, SetRecovery to the recovery's epoch.
	Epoch uint64
	// Leader and LeaderTerm name the last replica that took over as root,
	// and the raft term in which it did.
	Leader     string
	LeaderTerm uint64

	Status Status
	Events []Event

	// Recovery is where the last recovery the root committed stands
	// (SetRecovery; nil: none was).
	Recovery *Recovery

	// Applied is each writer's last applied Once key (Once.Seq by
	// Once.Writer): a retried command is not applied twice.
	Applied map[string]uint64
}

// AgentLost reports whether the agent of node was declared lost in
// incarnation inc or a later one: a failure of the node itself (not of
// one of its ranks) is recorded at that incarnation or above. An agent
// that asks to be adopted as incarnation inc is then fenced
// (docs/recovery.md, "Fencing").
func (s *State) AgentLost(node string, inc uint64) bool {
	for _, ev := range s.Events {
		if ev.Kind == EventFailure && ev.Rank == NoRank && ev.Node == node && max(ev.Incarnation, 1) >= max(inc, 1) {
			return true
		}
	}
	return false
}

// Copy returns a copy of s that shares only immutable byte slices.
func (s *State) Copy() *State {
	c := *s
	c.Plan.Nodes = slices.Clone(s.Plan.Nodes)
	c.Plan.Replicas = slices.Clone(s.Plan.Replicas)
	c.Agents = make(map[string]Agent, len(s.Agents))
	for k, v := range s.Agents {
		c.Agents[k] = v
	}
	c.Ranks = slices.Clone(s.Ranks)
	c.Applied = maps.Clone(s.Applied)
	c.Recovery = s.Recovery.Clone()
	// Events are only ever appended; the elements a copy sees never change.
	c.Events = s.Events[:len(s.Events):len(s.Events)]
	return &c
}

// Digest is a SHA-256 over the canonical encoding of the state. Replicas
// that applied the same log agree on it.
func (s *State) Digest() [32]byte {
	return sha256.Sum256(s.marshal())
}

// snapshotMagic starts every snapshot written by this package.
const snapshotMagic = "FTRS"

// snapshotVersion is the snapshot encoding written by this package.
// Version 1 held an opaque recovery record and an epoch of its own, and is
// read without them (a snapshot of a job that recovered loses where its
// recovery stood: for inspection only).
const snapshotVersion = 2

// marshal encodes the state canonically (map entries sorted by key).
func (s *State) marshal() []byte {
	var e encoder
	e.buf = append(e.buf, snapshotMagic...)
	e.uint(snapshotVersion)
	encodeJob(&e, &s.Job)
	encodePlan(&e, &s.Plan)
	names := make([]string, 0, len(s.Agents))
	for n := range s.Agents {
		names = append(names, n)
	}
	slices.Sort(names)
	e.uint(uint64(len(names)))
	for _, n := range names {
		encodeAgent(&e, s.Agents[n])
	}
	e.uint(uint64(len(s.Ranks)))
	for i := range s.Ranks {
		r := &s.Ranks[i]
		e.string(r.Node)
		e.int(int64(r.PID))
		e.bytes(r.ITuple)
		e.uint(r.Incarnation)
		e.byte(byte(r.State))
		e.int(int64(r.ExitCode))
	}
	e.uint(s.Version)
	e.uint(s.Epoch)
	e.string(s.Leader)
	e.uint(s.LeaderTerm)
	if s.Status.Done {
		e.byte(1)
	} else {
		e.byte(0)
	}
	e.int(int64(s.Status.ExitCode))
	e.string(s.Status.Message)
	e.uint(uint64(len(s.Events)))
	for i := range s.Events {
		ev := &s.Events[i]
		encodeEvent(&e, ev)
		e.uint(ev.Index)
		e.uint(ev.Term)
		e.uint(ev.Epoch)
		e.uint(ev.Version)
	}
	e.bool(s.Recovery != nil)
	if s.Recovery != nil {
		encodeRecovery(&e, s.Recovery)
	}
	// Appended after the recovery record, in the writers' order.
	writers := slices.Sorted(maps.Keys(s.Applied))
	e.uint(uint64(len(writers)))
	for _, w := range writers {
		e.string(w)
		e.uint(s.Applied[w])
	}
	return e.buf
}

// unmarshalState decodes what marshal wrote.
func unmarshalState(b []byte) (*State, error) {
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("snapshot: no %q header: %w", snapshotMagic, ErrMalformed)
	}
	d := newDecoder(b[len(snapshotMagic):], "snapshot")
	v := d.uint()
	if d.err == nil && v != snapshotVersion && v != 1 {
		return nil, fmt.Errorf("snapshot: encoding version %d, this build reads 1 and %d: %w", v, snapshotVersion, ErrMalformed)
	}
	s := &State{Agents: map[string]Agent{}}
	s.Job = decodeJob(d)
	s.Plan = decodePlan(d)
	na := d.count(3, "agent")
	for range na {
		a := decodeAgent(d)
		s.Agents[a.Node] = a
	}
	nr := d.count(6, "rank")
	if d.err == nil && nr != s.Job.Size {
		return nil, fmt.Errorf("snapshot: %d ranks for a job of size %d: %w", nr, s.Job.Size, ErrMalformed)
	}
	if nr > 0 {
		s.Ranks = make([]Rank, nr)
	}
	for i := range nr {
		r := &s.Ranks[i]
		r.Rank = i
		r.Node = d.string()
		r.PID = int(d.intRange(-1<<31, 1<<31-1, "pid"))
		r.ITuple = d.bytes()
		r.Incarnation = d.uint()
		r.State = RankState(d.byte())
		r.ExitCode = int(d.intRange(-1<<31, 1<<31-1, "exit code"))
		if d.err == nil && r.State >= rankStateEnd {
			d.fail("rank state")
		}
	}
	s.Version = d.uint()
	s.Epoch = d.uint()
	s.Leader = d.string()
	s.LeaderTerm = d.uint()
	s.Status.Done = d.byte() == 1
	s.Status.ExitCode = int(d.intRange(-1<<31, 1<<31-1, "exit code"))
	s.Status.Message = d.string()
	ne := d.count(9, "event")
	if ne > 0 {
		s.Events = make([]Event, 0, ne)
	}
	for range ne {
		ev := decodeEvent(d)
		ev.Index = d.uint()
		ev.Term = d.uint()
		ev.Epoch = d.uint()
		ev.Version = d.uint()
		s.Events = append(s.Events, ev)
	}
	switch {
	case v == 1 && d.err == nil && len(d.b) != 0:
		d.uint()  // the opaque record's epoch
		d.bytes() // the opaque record, not read
	case v >= 2 && d.bool():
		s.Recovery = decodeRecovery(d)
	}
	if d.err == nil && len(d.b) != 0 {
		n := d.count(2, "writer")
		if n > 0 {
			s.Applied = make(map[string]uint64, n)
		}
		for range n {
			w := d.string()
			s.Applied[w] = d.uint()
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("snapshot: %d bytes after the state: %w", len(d.b), ErrMalformed)
	}
	return s, nil
}

func encodeJob(e *encoder, j *JobSpec) {
	e.string(j.ID)
	e.uint(uint64(j.Size))
	e.bytes(j.Spec)
}

func decodeJob(d *decoder) JobSpec {
	var j JobSpec
	j.ID = d.string()
	j.Size = int(d.uintMax(MaxRanks, "job size"))
	j.Spec = d.bytes()
	return j
}

func encodePlan(e *encoder, p *Plan) {
	e.uint(uint64(len(p.Nodes)))
	for _, n := range p.Nodes {
		e.string(n.Name)
		e.string(n.Primary)
		e.string(n.Backup)
	}
	e.strings(p.Replicas)
}

func decodePlan(d *decoder) Plan {
	var p Plan
	n := d.count(3, "plan node")
	if n > 0 {
		p.Nodes = make([]PlanNode, 0, n)
	}
	for range n {
		p.Nodes = append(p.Nodes, PlanNode{Name: d.string(), Primary: d.string(), Backup: d.string()})
	}
	p.Replicas = d.strings("replica")
	return p
}

func encodeAgent(e *encoder, a Agent) {
	e.string(a.Node)
	e.string(a.Addr)
	e.uint(a.Incarnation)
}

func decodeAgent(d *decoder) Agent {
	return Agent{Node: d.string(), Addr: d.string(), Incarnation: d.uint()}
}

// encodeEvent writes the fields the root fills.
func encodeEvent(e *encoder, ev *Event) {
	e.int(unixNano(ev.Time))
	e.byte(byte(ev.Kind))
	e.string(ev.Node)
	e.int(int64(ev.Rank))
	e.uint(ev.Incarnation)
	e.string(ev.Detail)
}

func decodeEvent(d *decoder) Event {
	var ev Event
	ev.Time = fromUnixNano(d.int())
	ev.Kind = EventKind(d.byte())
	ev.Node = d.string()
	ev.Rank = int(d.intRange(NoRank, MaxRanks-1, "event rank"))
	ev.Incarnation = d.uint()
	ev.Detail = d.string()
	if d.err == nil && (ev.Kind == 0 || ev.Kind >= eventKindEnd) {
		d.fail("event kind")
	}
	return ev
}

// unixNano encodes a time; the zero time is 0.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNano decodes what unixNano wrote, in UTC.
func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
