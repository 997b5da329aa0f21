package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Result is what applying a committed command produced.
type Result struct {
	Index   uint64 // log index of the command
	Term    uint64 // term of the command
	Version uint64 // table version after the command
	Epoch   uint64 // recovery epoch after the command
	// Stale lists the positions, in the command's Ranks or Agents, of the
	// rows skipped as stale (an older incarnation, or a change to a row
	// that already exited or failed in the same incarnation).
	Stale []int
	// Ignored: the command's type is unknown to this replica and carried
	// the IgnoreUnknown bit; nothing changed.
	Ignored bool
	// Repeat: the command's Once key was applied already (its writer
	// retried it); nothing changed.
	Repeat bool
}

// FSM is the replicated state machine of one job: it implements
// raft.FSM and raft.BatchingFSM.
//
// Threading: raft calls Apply, ApplyBatch, Snapshot and Restore from one
// goroutine, never concurrently with each other; FSMSnapshot.Persist runs
// concurrently with later Applies and works on a copy. View, Copy, Digest,
// AppliedIndex and CheckInvariants may be called from any goroutine at any
// time: they take a read lock, and Apply takes the write lock, so a reader
// sees the state between two commands, never in the middle of one.
//
// Apply never panics and never fails raft: a command that cannot be
// decoded, is of an unknown type, or contradicts the state returns an
// error as its response (wrapping ErrMalformed, ErrUnknownCommand or
// ErrRefused) and leaves the state unchanged. Every replica reaches the
// same verdict on the same entry, so they stay identical.
type FSM struct {
	mu      sync.RWMutex
	s       *State
	open    map[Subject]uint64 // open failures: subject -> failed incarnation
	applied uint64             // index of the last log entry applied
}

// NewFSM returns the state machine of a job not yet set.
func NewFSM() *FSM {
	return &FSM{s: &State{Agents: map[string]Agent{}}, open: map[Subject]uint64{}}
}

// View calls fn with the current state under a read lock. fn must not
// modify the state or keep any part of it after it returns, and must not
// block: commands wait while it runs.
func (f *FSM) View(fn func(s *State)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.s)
}

// Copy returns a copy of the current state that the caller owns (see
// State for the byte slices it shares). It costs O(ranks + agents).
func (f *FSM) Copy() *State {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.Copy()
}

// Digest returns the digest of the current state (see State.Digest).
func (f *FSM) Digest() [32]byte {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.Digest()
}

// AppliedIndex returns the index of the last log entry this FSM has
// applied. raft's own Raft.AppliedIndex can run ahead of it (raft counts
// entries handed to the FSM goroutine): wait on this one to know that a
// replica's state includes an entry.
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.applied
}

// CheckInvariants checks the whole state and event log (see
// State.CheckInvariants).
func (f *FSM) CheckInvariants() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.s.CheckInvariants()
}

// Apply applies one committed log entry (raft.FSM). It returns a *Result,
// an error, or nil for an entry that is not a command.
func (f *FSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLocked(l)
}

// ApplyBatch applies committed entries in order under one lock
// (raft.BatchingFSM).
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]interface{}, len(logs))
	for i, l := range logs {
		out[i] = f.applyLocked(l)
	}
	return out
}

func (f *FSM) applyLocked(l *raft.Log) interface{} {
	if l.Index > f.applied {
		f.applied = l.Index
	}
	if l.Type != raft.LogCommand {
		return nil
	}
	c, once, err := decode(l.Data)
	if err != nil {
		if _, ok := err.(errIgnored); ok {
			return &Result{Index: l.Index, Term: l.Term, Version: f.s.Version, Epoch: f.s.Epoch, Ignored: true}
		}
		return fmt.Errorf("log entry %d: %w", l.Index, err)
	}
	if once.Seq != 0 && f.s.Applied[once.Writer] >= once.Seq {
		return &Result{Index: l.Index, Term: l.Term, Version: f.s.Version, Epoch: f.s.Epoch, Repeat: true}
	}
	res, err := f.apply(l.Index, l.Term, c)
	if err != nil {
		return fmt.Errorf("log entry %d (%T): %w", l.Index, c, err)
	}
	if once.Seq != 0 {
		if f.s.Applied == nil {
			f.s.Applied = map[string]uint64{}
		}
		f.s.Applied[once.Writer] = once.Seq
	}
	return res
}

// refuse builds the error of a refused command.
func refuse(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrRefused)
}

// apply checks a decoded command against the state and, if it is
// accepted, applies it. It changes nothing when it returns an error.
func (f *FSM) apply(index, term uint64, c Command) (*Result, error) {
	s := f.s
	res := &Result{Index: index, Term: term}
	if err := f.checkEvents(c.events()); err != nil {
		return nil, err
	}
	var auto []Event // events the command itself records
	switch c := c.(type) {
	case *SetJob:
		if s.Version != 0 {
			if !sameJob(&s.Job, &c.Job) {
				return nil, refuse("job %q is already set", s.Job.ID)
			}
			break // a retried SetJob: no change
		}
		if c.Job.ID == "" || c.Job.Size < 1 || c.Job.Size > MaxRanks {
			return nil, refuse("job %q of size %d: need an id and 1..%d ranks", c.Job.ID, c.Job.Size, MaxRanks)
		}
		s.Job = c.Job
		s.Ranks = make([]Rank, c.Job.Size)
		for i := range s.Ranks {
			s.Ranks[i].Rank = i
		}
		s.Version = 1
	case *SetPlan:
		if s.Version == 0 {
			return nil, refuse("plan before the job")
		}
		if c.ExpectEpoch != s.Epoch {
			return nil, refuse("plan of a root at epoch %d, now %d", c.ExpectEpoch, s.Epoch)
		}
		s.Plan = c.Plan
		s.Version++
	case *UpdateAgents:
		if s.Version == 0 {
			return nil, refuse("agents before the job")
		}
		for i := range c.Agents {
			if c.Agents[i].Node == "" {
				return nil, refuse("agent %d has no node name", i)
			}
		}
		changed := false
		for i, a := range c.Agents {
			cur, ok := s.Agents[a.Node]
			if ok && a.Incarnation < cur.Incarnation {
				res.Stale = append(res.Stale, i)
				continue
			}
			if !ok || cur != a {
				s.Agents[a.Node] = a
				changed = true
			}
		}
		if changed {
			s.Version++
		}
	case *UpdateRanks:
		if s.Version == 0 {
			return nil, refuse("ranks before the job")
		}
		if c.ExpectVersion != 0 && c.ExpectVersion != s.Version {
			return nil, refuse("update computed against table version %d, now %d", c.ExpectVersion, s.Version)
		}
		for i := range c.Ranks {
			if c.Ranks[i].Rank >= len(s.Ranks) {
				return nil, refuse("rank %d of a job of %d ranks", c.Ranks[i].Rank, len(s.Ranks))
			}
		}
		changed := false
		for i := range c.Ranks {
			u := &c.Ranks[i]
			cur := &s.Ranks[u.Rank]
			if staleRank(cur, u) {
				res.Stale = append(res.Stale, i)
				continue
			}
			if !sameRank(cur, u) {
				*cur = *u
				changed = true
			}
		}
		if changed {
			s.Version++
		}
	case *AppendEvents:
	case *BumpEpoch:
		if c.ExpectEpoch != s.Epoch {
			return nil, refuse("epoch bump from %d, now %d", c.ExpectEpoch, s.Epoch)
		}
		s.Epoch++
		if c.Leader != "" {
			s.Leader = c.Leader
			s.LeaderTerm = term
			auto = append(auto, Event{Time: c.Time, Kind: EventLeader, Node: c.Leader, Rank: NoRank, Detail: c.Reason})
		}
	case *SetRecovery:
		if s.Version == 0 {
			return nil, refuse("recovery before the job")
		}
		if c.ExpectEpoch != s.Epoch {
			return nil, refuse("recovery record of a root at epoch %d, now %d", c.ExpectEpoch, s.Epoch)
		}
		if s.Recovery != nil && c.Recovery.Epoch < s.Recovery.Epoch {
			return nil, refuse("recovery record of epoch %d, the recorded one's is %d", c.Recovery.Epoch, s.Recovery.Epoch)
		}
		if err := c.Recovery.check(s); err != nil {
			return nil, err
		}
		s.Recovery, s.Epoch = c.Recovery.Clone(), max(c.Recovery.Epoch, s.Epoch)
	case *Finish:
		if s.Status.Done {
			if s.Status != c.Status {
				return nil, refuse("job already finished with exit code %d", s.Status.ExitCode)
			}
			break // a retried Finish: no change
		}
		s.Status = c.Status
		s.Status.Done = true
		auto = append(auto, Event{Time: c.Time, Kind: EventJobEnd, Rank: NoRank, Incarnation: 0, Detail: c.Status.Message})
		clear(f.open)
	default:
		return nil, fmt.Errorf("command %T: %w", c, ErrUnknownCommand)
	}
	f.appendEvents(index, term, c.events())
	f.appendEvents(index, term, auto)
	res.Version, res.Epoch = s.Version, s.Epoch
	return res, nil
}

// checkEvents checks the events a command carries against the state, in
// order, without changing anything.
func (f *FSM) checkEvents(evs []Event) error {
	s := f.s
	var overlay map[Subject]uint64 // open failures as the events change them
	openInc := func(subj Subject) (uint64, bool) {
		if overlay != nil {
			if inc, ok := overlay[subj]; ok {
				return inc, inc != closed
			}
		}
		inc, ok := f.open[subj]
		return inc, ok
	}
	for i := range evs {
		ev := &evs[i]
		switch ev.Kind {
		case EventLeader, EventJobEnd:
			return refuse("event %d: %s events are recorded by the state machine only", i, ev.Kind)
		}
		if ev.Rank != NoRank && ev.Rank >= len(s.Ranks) {
			return refuse("event %d: rank %d of a job of %d ranks", i, ev.Rank, len(s.Ranks))
		}
		subj := ev.Subject()
		switch ev.Kind {
		case EventFailure:
			if s.Status.Done {
				return refuse("event %d: failure of %s after the job ended", i, subj)
			}
			if known := f.incarnation(ev); ev.Incarnation < known {
				return refuse("event %d: failure of %s incarnation %d, which is stale (now %d)", i, subj, ev.Incarnation, known)
			}
			if inc, ok := openInc(subj); ok && ev.Incarnation <= inc {
				return refuse("event %d: %s incarnation %d already failed", i, subj, ev.Incarnation)
			}
			if overlay == nil {
				overlay = map[Subject]uint64{}
			}
			overlay[subj] = ev.Incarnation
		case EventRecovered:
			inc, ok := openInc(subj)
			if !ok {
				return refuse("event %d: recovery of %s, which has no open failure", i, subj)
			}
			if ev.Incarnation <= inc {
				return refuse("event %d: recovery of %s with incarnation %d, not above the failed %d", i, subj, ev.Incarnation, inc)
			}
			if overlay == nil {
				overlay = map[Subject]uint64{}
			}
			overlay[subj] = closed
		}
	}
	return nil
}

// closed marks a failure closed in checkEvents' overlay.
const closed = ^uint64(0)

// incarnation returns the recorded incarnation of an event's subject.
func (f *FSM) incarnation(ev *Event) uint64 {
	if ev.Rank != NoRank {
		return f.s.Ranks[ev.Rank].Incarnation
	}
	return f.s.Agents[ev.Node].Incarnation
}

// appendEvents appends checked events, stamping them with their log
// position and the state after the command, and tracks open failures.
func (f *FSM) appendEvents(index, term uint64, evs []Event) {
	for _, ev := range evs {
		ev.Index, ev.Term, ev.Epoch, ev.Version = index, term, f.s.Epoch, f.s.Version
		f.s.Events = append(f.s.Events, ev)
		TrackOpen(f.open, &ev)
	}
}

// TrackOpen updates open, the failures still open (the incarnation that
// failed, by subject), for one event of the log, as the state machine
// does: a failure opens its subject, a recovery closes it, the job's end
// closes them all. A writer of the log starts from the same map.
func TrackOpen(open map[Subject]uint64, ev *Event) {
	switch ev.Kind {
	case EventFailure:
		open[ev.Subject()] = ev.Incarnation
	case EventRecovered:
		delete(open, ev.Subject())
	case EventJobEnd:
		clear(open)
	}
}

// staleRank reports whether update u of row cur must be skipped.
func staleRank(cur, u *Rank) bool {
	if u.Incarnation < cur.Incarnation {
		return true
	}
	return u.Incarnation == cur.Incarnation && cur.State.terminal() && !sameRank(cur, u)
}

func sameRank(a, b *Rank) bool {
	return a.Rank == b.Rank && a.Node == b.Node && a.PID == b.PID && bytes.Equal(a.ITuple, b.ITuple) &&
		a.Incarnation == b.Incarnation && a.State == b.State && a.ExitCode == b.ExitCode
}

func sameJob(a, b *JobSpec) bool {
	return a.ID == b.ID && a.Size == b.Size && bytes.Equal(a.Spec, b.Spec)
}

// Snapshot returns a point-in-time copy for raft to persist
// (raft.FSM).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{s: f.Copy()}, nil
}

// Restore replaces the state with a snapshot's (raft.FSM).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("restore: read snapshot: %w", err)
	}
	s, err := unmarshalState(b)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	open := map[Subject]uint64{}
	for i := range s.Events {
		TrackOpen(open, &s.Events[i])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s, f.open = s, open
	if n := len(s.Events); n > 0 && s.Events[n-1].Index > f.applied {
		f.applied = s.Events[n-1].Index
	}
	return nil
}

// fsmSnapshot is a copy of the state; Persist runs concurrently with Apply
// and touches only the copy.
type fsmSnapshot struct {
	s *State
}

// Persist writes the snapshot (raft.FSMSnapshot).
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.s.marshal()); err != nil {
		return errors.Join(fmt.Errorf("persist snapshot: %w", err), sink.Cancel())
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("persist snapshot: close: %w", err)
	}
	return nil
}

// Release does nothing: the copy is garbage collected (raft.FSMSnapshot).
func (s *fsmSnapshot) Release() {}

var _ raft.BatchingFSM = (*FSM)(nil)
