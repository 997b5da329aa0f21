package raftstore

import (
	"fmt"
	"time"
)

// CommandType is the first byte of every command in the raft log. The low
// seven bits are the type; the high bit is IgnoreUnknown.
type CommandType uint8

// IgnoreUnknown, set in a command's type byte, tells a replica that does not
// know the type to skip the command instead of failing it. A newer leader
// sets it on commands an older replica may safely miss.
const IgnoreUnknown CommandType = 0x80

// Command types. Numbers are never reused.
const (
	TypeSetJob       CommandType = 1
	TypeSetPlan      CommandType = 2
	TypeUpdateAgents CommandType = 3
	TypeUpdateRanks  CommandType = 4
	TypeAppendEvents CommandType = 5
	TypeBumpEpoch    CommandType = 6
	TypeFinish       CommandType = 7
	// typeOpaqueRecovery (8) was an opaque recovery record; retired, not
	// read (errOpaqueRecovery).
	typeOpaqueRecovery CommandType = 8
	TypeSetRecovery    CommandType = 9
)

// payloadVersion is the encoding version written at the start of every
// payload. Fields are only ever appended; a reader of version v fills the
// fields a version-v writer did not know with zero values, and ignores
// trailing fields it does not know.
const payloadVersion = 1

// A Command changes the replicated state. It is one of *SetJob, *SetPlan,
// *UpdateAgents, *UpdateRanks, *AppendEvents, *BumpEpoch, *Finish,
// *SetRecovery. Every
// command may carry events, appended atomically with its other effect.
type Command interface {
	Type() CommandType
	appendPayload(e *encoder)
	events() []Event
}

// SetJob records the job. A second SetJob is refused unless it is
// identical (so that retrying one is harmless). It sets the table version
// to 1 and sizes the node table.
type SetJob struct {
	Job    JobSpec
	Events []Event
}

// SetPlan replaces the plan (the initial one, or one with recomputed
// backup parents after a failure). It advances the table version. It is
// refused unless the state is at ExpectEpoch: a root deposed by a takeover
// (BumpEpoch) cannot change the tree its successor acts on.
type SetPlan struct {
	Plan        Plan
	ExpectEpoch uint64
	Events      []Event
}

// UpdateAgents records agents' addresses and incarnations. An update with
// an incarnation below the recorded one is stale and skipped (reported in
// Result.Stale as -1 - its position). The table version advances if
// anything changed.
type UpdateAgents struct {
	Agents []Agent
	Events []Event
}

// UpdateRanks sets rows of the node table: one command carries a whole
// subtree's report. A row with an incarnation below the recorded one, or a
// change of a terminal (exited, failed) row of the same incarnation, is
// stale and skipped (listed in Result.Stale). If ExpectVersion is non-zero
// and differs from the table version, the whole command is refused: a root
// that computed a patch against an old table cannot apply it. The table
// version advances by one if any row changed.
type UpdateRanks struct {
	ExpectVersion uint64
	Ranks         []Rank
	Events        []Event
}

// AppendEvents appends events to the event log and changes nothing else.
type AppendEvents struct {
	Events []Event
}

// BumpEpoch advances the recovery epoch by one if it equals ExpectEpoch
// and refuses otherwise. With Leader set it records a takeover: State.Leader
// and State.LeaderTerm (the term of the command's log entry) change and an
// EventLeader is appended.
type BumpEpoch struct {
	Time        time.Time // of the EventLeader; Replica.Apply fills a zero Time
	ExpectEpoch uint64
	Leader      string
	Reason      string
	Events      []Event
}

// Finish records the job's final status and appends an EventJobEnd. A
// second Finish is refused unless it is identical.
type Finish struct {
	Time   time.Time // of the EventJobEnd; Replica.Apply fills a zero Time
	Status Status    // Done is implied
	Events []Event
}

// SetRecovery records where a recovery stands (State.Recovery), which a
// new leader carries on from. It is refused unless the state is at
// ExpectEpoch, the epoch its writer last saw committed: a root deposed by
// a takeover (BumpEpoch) cannot record over its successor; and refused if
// the recovery's epoch is below the recorded one's. The state's epoch
// becomes the recovery's if that is larger (a takeover since may have
// moved the state's beyond it).
type SetRecovery struct {
	ExpectEpoch uint64
	Recovery    Recovery
	Events      []Event
}

func (*SetJob) Type() CommandType       { return TypeSetJob }
func (*SetPlan) Type() CommandType      { return TypeSetPlan }
func (*UpdateAgents) Type() CommandType { return TypeUpdateAgents }
func (*UpdateRanks) Type() CommandType  { return TypeUpdateRanks }
func (*AppendEvents) Type() CommandType { return TypeAppendEvents }
func (*BumpEpoch) Type() CommandType    { return TypeBumpEpoch }
func (*Finish) Type() CommandType       { return TypeFinish }
func (*SetRecovery) Type() CommandType  { return TypeSetRecovery }

func (c *SetJob) events() []Event       { return c.Events }
func (c *SetPlan) events() []Event      { return c.Events }
func (c *UpdateAgents) events() []Event { return c.Events }
func (c *UpdateRanks) events() []Event  { return c.Events }
func (c *AppendEvents) events() []Event { return c.Events }
func (c *BumpEpoch) events() []Event    { return c.Events }
func (c *Finish) events() []Event       { return c.Events }
func (c *SetRecovery) events() []Event  { return c.Events }

// Once makes a command idempotent across its writer's retries: a command
// whose key was applied already is not applied again (Result.Repeat). A
// writer numbers its commands from 1 and retries one with the same key
// when it cannot tell whether it was committed (a leadership change while
// it waited); the state keeps each writer's last applied number.
type Once struct {
	Writer string // unique per writer (a root's journal)
	Seq    uint64 // from 1, increasing; 0: no key
}

// Encode returns the log entry for a command: the type byte, the payload
// version, the events, then the type's own fields (last, so that a newer
// version can append fields).
func Encode(c Command) []byte { return EncodeOnce(c, Once{}) }

// onceVersion is the payload version of a command with a Once key, which
// follows the version.
const onceVersion = 2

// EncodeOnce is Encode with a Once key (none if its Seq is 0).
func EncodeOnce(c Command, o Once) []byte {
	e := encoder{buf: make([]byte, 0, 64)}
	e.byte(byte(c.Type()))
	if o.Seq == 0 {
		e.uint(payloadVersion)
	} else {
		e.uint(onceVersion)
		e.string(o.Writer)
		e.uint(o.Seq)
	}
	evs := c.events()
	e.uint(uint64(len(evs)))
	for i := range evs {
		encodeEvent(&e, &evs[i])
	}
	c.appendPayload(&e)
	return e.buf
}

func (c *SetJob) appendPayload(e *encoder) { encodeJob(e, &c.Job) }

func (c *SetPlan) appendPayload(e *encoder) {
	encodePlan(e, &c.Plan)
	e.uint(c.ExpectEpoch)
}

func (c *UpdateAgents) appendPayload(e *encoder) {
	e.uint(uint64(len(c.Agents)))
	for _, a := range c.Agents {
		encodeAgent(e, a)
	}
}

// appendPayload writes each node name once, and ranks refer to it by
// position: a subtree's report names few nodes and many ranks.
func (c *UpdateRanks) appendPayload(e *encoder) {
	e.uint(c.ExpectVersion)
	index := map[string]int{}
	var nodes []string
	for i := range c.Ranks {
		n := c.Ranks[i].Node
		if _, ok := index[n]; !ok {
			index[n] = len(nodes)
			nodes = append(nodes, n)
		}
	}
	e.strings(nodes)
	e.uint(uint64(len(c.Ranks)))
	for i := range c.Ranks {
		r := &c.Ranks[i]
		e.uint(uint64(r.Rank))
		e.uint(uint64(index[r.Node]))
		e.int(int64(r.PID))
		e.uint(r.Incarnation)
		e.byte(byte(r.State))
		e.int(int64(r.ExitCode))
		e.bytes(r.ITuple)
	}
}

func (c *AppendEvents) appendPayload(*encoder) {}

func (c *BumpEpoch) appendPayload(e *encoder) {
	e.int(unixNano(c.Time))
	e.uint(c.ExpectEpoch)
	e.string(c.Leader)
	e.string(c.Reason)
}

func (c *SetRecovery) appendPayload(e *encoder) {
	e.uint(c.ExpectEpoch)
	encodeRecovery(e, &c.Recovery)
}

func (c *Finish) appendPayload(e *encoder) {
	e.int(unixNano(c.Time))
	e.int(int64(c.Status.ExitCode))
	e.string(c.Status.Message)
}

// errIgnored is returned by Decode for an unknown command that carries the
// IgnoreUnknown bit.
type errIgnored struct{ typ CommandType }

func (e errIgnored) Error() string { return fmt.Sprintf("ignored unknown command type %d", e.typ) }

// Decode decodes a log entry written by Encode. An unknown type with the
// IgnoreUnknown bit returns (nil, nil); without it, an error wrapping
// ErrUnknownCommand. Malformed input returns an error wrapping
// ErrMalformed; Decode never panics.
func Decode(b []byte) (Command, error) {
	c, _, err := decode(b)
	if _, ok := err.(errIgnored); ok {
		return nil, nil
	}
	return c, err
}

// decode is Decode that also returns the command's Once key.
func decode(b []byte) (Command, Once, error) {
	if len(b) == 0 {
		return nil, Once{}, fmt.Errorf("empty command: %w", ErrMalformed)
	}
	full := CommandType(b[0])
	typ := full &^ IgnoreUnknown
	d := newDecoder(b[1:], fmt.Sprintf("command type %d", typ))
	var c Command
	switch typ {
	case TypeSetJob:
		c = &SetJob{}
	case TypeSetPlan:
		c = &SetPlan{}
	case TypeUpdateAgents:
		c = &UpdateAgents{}
	case TypeUpdateRanks:
		c = &UpdateRanks{}
	case TypeAppendEvents:
		c = &AppendEvents{}
	case TypeBumpEpoch:
		c = &BumpEpoch{}
	case TypeFinish:
		c = &Finish{}
	case TypeSetRecovery:
		c = &SetRecovery{}
	case typeOpaqueRecovery:
		return nil, Once{}, errOpaqueRecovery()
	default:
		if full&IgnoreUnknown != 0 {
			return nil, Once{}, errIgnored{typ}
		}
		return nil, Once{}, fmt.Errorf("command type %d: %w", typ, ErrUnknownCommand)
	}
	var once Once
	if v := d.uint(); d.err == nil && v == 0 {
		return nil, once, fmt.Errorf("command type %d: payload version 0: %w", typ, ErrMalformed)
	} else if v >= onceVersion {
		once.Writer = d.string()
		once.Seq = d.uint()
	}
	var evs []Event
	n := d.count(6, "event")
	if n > 0 {
		evs = make([]Event, 0, n)
	}
	for range n {
		evs = append(evs, decodeEvent(d))
	}
	switch c := c.(type) {
	case *SetJob:
		c.Job = decodeJob(d)
		c.Events = evs
	case *SetPlan:
		c.Plan = decodePlan(d)
		c.ExpectEpoch = d.uint()
		c.Events = evs
	case *UpdateAgents:
		n := d.count(3, "agent")
		if n > 0 {
			c.Agents = make([]Agent, 0, n)
		}
		for range n {
			c.Agents = append(c.Agents, decodeAgent(d))
		}
		c.Events = evs
	case *UpdateRanks:
		decodeRanks(d, c)
		c.Events = evs
	case *AppendEvents:
		c.Events = evs
	case *BumpEpoch:
		c.Time = fromUnixNano(d.int())
		c.ExpectEpoch = d.uint()
		c.Leader = d.string()
		c.Reason = d.string()
		c.Events = evs
	case *SetRecovery:
		c.ExpectEpoch = d.uint()
		if r := decodeRecovery(d); r != nil {
			c.Recovery = *r
		}
		c.Events = evs
	case *Finish:
		c.Time = fromUnixNano(d.int())
		c.Status.Done = true
		c.Status.ExitCode = int(d.intRange(-1<<31, 1<<31-1, "exit code"))
		c.Status.Message = d.string()
		c.Events = evs
	}
	if d.err != nil {
		return nil, Once{}, d.err
	}
	return c, once, nil
}

func decodeRanks(d *decoder, c *UpdateRanks) {
	c.ExpectVersion = d.uint()
	nodes := d.strings("node")
	n := d.count(7, "rank")
	if n > 0 {
		c.Ranks = make([]Rank, 0, n)
	}
	for range n {
		var r Rank
		r.Rank = int(d.uintMax(MaxRanks-1, "rank"))
		ni := d.uint()
		if d.err == nil && ni >= uint64(len(nodes)) {
			d.fail("node index")
		}
		if d.err == nil {
			r.Node = nodes[ni]
		}
		r.PID = int(d.intRange(-1<<31, 1<<31-1, "pid"))
		r.Incarnation = d.uint()
		r.State = RankState(d.byte())
		r.ExitCode = int(d.intRange(-1<<31, 1<<31-1, "exit code"))
		r.ITuple = d.bytes()
		if d.err == nil && (r.State == RankUnknown || r.State >= rankStateEnd) {
			d.fail("rank state")
		}
		if d.err != nil {
			return
		}
		c.Ranks = append(c.Ranks, r)
	}
}
