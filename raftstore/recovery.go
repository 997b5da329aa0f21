package raftstore

import (
	"bytes"
	"fmt"
	"slices"
)

// Recovery is where the last recovery the root committed stands, typed so
// that a new leader rebuilds its planner from the state alone and the
// state machine checks it: the epoch its commands carry, the stage
// committed last ("" once the last recovery was carried out to its end),
// the node table's version once patched, the job's restarts so far, the
// ranks and the agents being started again.
//
// Epoch is not a second counter: the state has one (State.Epoch), which
// the record moves forward (SetRecovery) and takeovers too (BumpEpoch).
// It is the value the recovery's commands carried to the agents, which
// count their collectives under it: a takeover since moved the state's
// further, and a successor must know the one the agents know.
type Recovery struct {
	Epoch    uint64
	Stage    string // suspend, respawn, patch, resume, restart-job, relaunch; "": settled
	Version  uint64 // the node table's version once patched
	Restarts int    // job restarts so far
	Alone    bool   // the ranks are started again alone
	Ranks    []RecoveryRank
	Agents   []RecoveryAgent
}

// RecoveryRank is a rank a recovery starts again.
type RecoveryRank struct {
	Rank        int
	Agent       int // the agent (by plan position) that runs it
	Incarnation uint64
	Addr        []byte // a respawned rank's address (patch); nil: none yet
	Restarts    int
	Failed      bool // not respawned yet: Incarnation is the one that failed
}

// RecoveryAgent is an agent a recovery started again, or starts again.
type RecoveryAgent struct {
	Agent       int // by plan position
	Node        string
	Incarnation uint64
	Restarts    int
	Lost        bool // not relaunched yet: Incarnation is the one that was lost
	Up          bool // relaunched and up
	// Unfenced are its lost incarnations whose fence was not confirmed;
	// Fenced those whose fence was, with how.
	Unfenced []FenceRecord
	Fenced   []FenceRecord
}

// FenceRecord is a lost agent incarnation to fence, or fenced: what it
// started on Node, incarnations up to Incarnation; How says how the fence
// was confirmed ("": not yet).
type FenceRecord struct {
	Node        string
	Incarnation uint64
	How         string
}

// Clone returns a deep copy of r (nil for nil).
func (r *Recovery) Clone() *Recovery {
	if r == nil {
		return nil
	}
	c := *r
	c.Ranks = slices.Clone(r.Ranks)
	for i := range c.Ranks {
		c.Ranks[i].Addr = bytes.Clone(c.Ranks[i].Addr)
	}
	c.Agents = slices.Clone(r.Agents)
	for i := range c.Agents {
		c.Agents[i].Unfenced = slices.Clone(c.Agents[i].Unfenced)
		c.Agents[i].Fenced = slices.Clone(c.Agents[i].Fenced)
	}
	return &c
}

// check refuses a record the state cannot hold: ranks outside the job.
func (r *Recovery) check(s *State) error {
	for i := range r.Ranks {
		if rk := r.Ranks[i].Rank; rk < 0 || rk >= len(s.Ranks) {
			return refuse("recovery record: rank %d of a job of %d ranks", rk, len(s.Ranks))
		}
	}
	for i := range r.Agents {
		if r.Agents[i].Agent < 0 {
			return refuse("recovery record: agent %d", r.Agents[i].Agent)
		}
	}
	return nil
}

func encodeRecovery(e *encoder, r *Recovery) {
	e.uint(r.Epoch)
	e.string(r.Stage)
	e.uint(r.Version)
	e.uint(uint64(r.Restarts))
	e.bool(r.Alone)
	e.uint(uint64(len(r.Ranks)))
	for i := range r.Ranks {
		rr := &r.Ranks[i]
		e.uint(uint64(rr.Rank))
		e.uint(uint64(rr.Agent))
		e.uint(rr.Incarnation)
		e.bool(rr.Addr != nil)
		e.bytes(rr.Addr)
		e.uint(uint64(rr.Restarts))
		e.bool(rr.Failed)
	}
	e.uint(uint64(len(r.Agents)))
	for i := range r.Agents {
		ar := &r.Agents[i]
		e.uint(uint64(ar.Agent))
		e.string(ar.Node)
		e.uint(ar.Incarnation)
		e.uint(uint64(ar.Restarts))
		e.bool(ar.Lost)
		e.bool(ar.Up)
		encodeFences(e, ar.Unfenced)
		encodeFences(e, ar.Fenced)
	}
}

func decodeRecovery(d *decoder) *Recovery {
	r := &Recovery{}
	r.Epoch = d.uint()
	r.Stage = d.string()
	r.Version = d.uint()
	r.Restarts = int(d.uintMax(1<<31-1, "restarts"))
	r.Alone = d.bool()
	n := d.count(7, "recovery rank")
	if n > 0 {
		r.Ranks = make([]RecoveryRank, 0, n)
	}
	for range n {
		var rr RecoveryRank
		rr.Rank = int(d.uintMax(MaxRanks-1, "recovery rank"))
		rr.Agent = int(d.uintMax(MaxRanks-1, "recovery rank's agent"))
		rr.Incarnation = d.uint()
		hasAddr := d.bool()
		rr.Addr = d.bytes()
		switch {
		case hasAddr && rr.Addr == nil:
			rr.Addr = []byte{} // an empty address is one, nil is none
		case !hasAddr && rr.Addr != nil:
			d.fail("recovery rank address")
		}
		rr.Restarts = int(d.uintMax(1<<31-1, "rank restarts"))
		rr.Failed = d.bool()
		if d.err != nil {
			return nil
		}
		r.Ranks = append(r.Ranks, rr)
	}
	n = d.count(8, "recovery agent")
	if n > 0 {
		r.Agents = make([]RecoveryAgent, 0, n)
	}
	for range n {
		var ar RecoveryAgent
		ar.Agent = int(d.uintMax(MaxRanks-1, "recovery agent"))
		ar.Node = d.string()
		ar.Incarnation = d.uint()
		ar.Restarts = int(d.uintMax(1<<31-1, "agent restarts"))
		ar.Lost = d.bool()
		ar.Up = d.bool()
		ar.Unfenced = decodeFences(d)
		ar.Fenced = decodeFences(d)
		if d.err != nil {
			return nil
		}
		r.Agents = append(r.Agents, ar)
	}
	if d.err != nil {
		return nil
	}
	return r
}

func encodeFences(e *encoder, fs []FenceRecord) {
	e.uint(uint64(len(fs)))
	for _, f := range fs {
		e.string(f.Node)
		e.uint(f.Incarnation)
		e.string(f.How)
	}
}

func decodeFences(d *decoder) []FenceRecord {
	n := d.count(3, "fence")
	if n == 0 {
		return nil
	}
	fs := make([]FenceRecord, 0, n)
	for range n {
		fs = append(fs, FenceRecord{Node: d.string(), Incarnation: d.uint(), How: d.string()})
	}
	return fs
}

// errOpaqueRecovery is the error of a command of the retired type 8: an
// opaque recovery record, as ftlaunch wrote them before the record was
// typed. Neither a replica nor the inspector reads it.
func errOpaqueRecovery() error {
	return fmt.Errorf("command type %d: an opaque recovery record of an older ftlaunch's state log, which this build does not read (docs/raftstore.md): %w",
		typeOpaqueRecovery, ErrUnknownCommand)
}
