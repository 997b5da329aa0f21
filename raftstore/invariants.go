package raftstore

import (
	"errors"
	"fmt"
)

// CheckInvariants checks the state and its whole event log, and returns
// every violation found (joined; each wraps ErrInvariant), or nil:
//
//   - the node table has Job.Size rows and row i is rank i;
//   - along the event log, log index, term, recovery epoch and table
//     version never go back, and the state's version and epoch are at
//     least the last event's;
//   - per node and per rank, incarnations named by events never go back,
//     and the table's incarnations are at least the last ones named;
//   - every failure is followed by a recovery of the same node or rank
//     (with a larger incarnation), by a failure of a larger incarnation
//     that supersedes it, or by the job's end; every recovery follows an
//     open failure;
//   - each takeover (EventLeader) advanced the epoch; there is at most one
//     EventJobEnd, and there is one exactly when Status.Done.
//
// The FSM enforces the same rules as it applies commands (it refuses or
// skips what would break them); this function re-derives them from the
// log, so it also catches a state restored from a bad snapshot or built
// by a buggy build.
func (s *State) CheckInvariants() error {
	var errs []error
	bad := func(format string, args ...any) {
		if len(errs) < 100 {
			errs = append(errs, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvariant))
		}
	}

	if s.Version > 0 && len(s.Ranks) != s.Job.Size {
		bad("node table has %d rows for a job of %d ranks", len(s.Ranks), s.Job.Size)
	}
	for i := range s.Ranks {
		if s.Ranks[i].Rank != i {
			bad("node table row %d holds rank %d", i, s.Ranks[i].Rank)
			break
		}
	}

	type failure struct {
		event int // position of the open failure event
		inc   uint64
	}
	open := map[Subject]failure{}
	lastInc := map[Subject]uint64{}
	var prev *Event
	jobEnds := 0
	for i := range s.Events {
		ev := &s.Events[i]
		if prev != nil {
			if ev.Index < prev.Index || ev.Term < prev.Term {
				bad("event %d at index %d term %d follows index %d term %d", i, ev.Index, ev.Term, prev.Index, prev.Term)
			}
			if ev.Version < prev.Version {
				bad("event %d: table version went back from %d to %d", i, prev.Version, ev.Version)
			}
			if ev.Epoch < prev.Epoch {
				bad("event %d: epoch went back from %d to %d", i, prev.Epoch, ev.Epoch)
			}
			if ev.Kind == EventLeader && ev.Epoch <= prev.Epoch && ev.Index != prev.Index {
				bad("event %d: takeover by %s did not advance the epoch (%d)", i, ev.Node, ev.Epoch)
			}
		}
		subj := ev.Subject()
		if ev.Incarnation > 0 || ev.Kind == EventFailure || ev.Kind == EventRecovered {
			if last, ok := lastInc[subj]; ok && ev.Incarnation < last {
				bad("event %d (%s): incarnation of %s went back from %d to %d", i, ev.Kind, subj, last, ev.Incarnation)
			}
			if ev.Incarnation > lastInc[subj] {
				lastInc[subj] = ev.Incarnation
			}
		}
		switch ev.Kind {
		case EventFailure:
			if f, ok := open[subj]; ok && ev.Incarnation <= f.inc {
				bad("event %d: second failure of %s incarnation %d (first at event %d)", i, subj, ev.Incarnation, f.event)
			}
			if jobEnds > 0 {
				bad("event %d: failure of %s after the job ended", i, subj)
			}
			open[subj] = failure{event: i, inc: ev.Incarnation}
		case EventRecovered:
			f, ok := open[subj]
			switch {
			case !ok:
				bad("event %d: recovery of %s without an open failure", i, subj)
			case ev.Incarnation <= f.inc:
				bad("event %d: recovery of %s to incarnation %d, not above the failed %d", i, subj, ev.Incarnation, f.inc)
			}
			delete(open, subj)
		case EventJobEnd:
			jobEnds++
			clear(open)
		}
		prev = ev
	}
	for subj, f := range open {
		bad("failure of %s incarnation %d (event %d) has no recovery and the job has not ended", subj, f.inc, f.event)
	}
	if jobEnds > 1 {
		bad("%d job-end events", jobEnds)
	}
	if s.Status.Done != (jobEnds == 1) {
		bad("status done=%v with %d job-end events", s.Status.Done, jobEnds)
	}
	if prev != nil {
		if s.Version < prev.Version {
			bad("table version %d is below the last event's %d", s.Version, prev.Version)
		}
		if s.Epoch < prev.Epoch {
			bad("epoch %d is below the last event's %d", s.Epoch, prev.Epoch)
		}
	}
	for subj, inc := range lastInc {
		var have uint64
		if subj.Rank != NoRank {
			if subj.Rank < 0 || subj.Rank >= len(s.Ranks) {
				bad("events name %s of a job of %d ranks", subj, len(s.Ranks))
				continue
			}
			have = s.Ranks[subj.Rank].Incarnation
		} else {
			a, ok := s.Agents[subj.Node]
			if !ok {
				continue // a node that never had an agent recorded
			}
			have = a.Incarnation
		}
		if have < inc {
			bad("%s has incarnation %d in the table, below the %d its events name", subj, have, inc)
		}
	}
	return errors.Join(errs...)
}
