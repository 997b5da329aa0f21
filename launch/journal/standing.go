package journal

// Where the journal's replica stands in its group: whether its writer (the
// root) still leads, and whether another replica took the root over.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// ErrFenced: another replica took the job's root over (it committed an
// epoch bump naming itself, raftstore's Takeover) after this journal's
// replica led. The writer is deposed for good: its writes fail with it at
// once, and its root must not coordinate again (docs/state.md, "A
// front-end that lost the lead").
var ErrFenced = errors.New("another replica took the job's root over")

// Takeover names the root that took the place of this journal's writer.
type Takeover struct {
	Leader string // its node
	Term   uint64 // the raft term it took over in
	Epoch  uint64 // the recovery epoch its takeover began
}

func (t *Takeover) String() string {
	return fmt.Sprintf("node %s took over as root in term %d (epoch %d)", t.Leader, t.Term, t.Epoch)
}

// Standing is where the journal's replica stands in its group.
type Standing struct {
	// Leads: the replica leads, as a quorum confirmed just now (raft's
	// VerifyLeader), or the log has no group (a solo log, a replica not
	// started yet): its writer is the root.
	Leads bool
	// Leader is the leader the replica knows when it does not lead (""
	// none), Leaderless how long it has known none.
	Leader     string
	Leaderless time.Duration
	// TakenOver is set once the replica's state records that another
	// replica took the root over: the writer is fenced.
	TakenOver *Takeover
	// Err says why leadership could not be confirmed.
	Err error
}

// Standing checks whether the journal's writer still leads its group.
// A replica that believes it leads asks a quorum (VerifyLeader, bounded by
// ctx): a leader paused past its lease, or cut off, may not know yet that
// the others elected another.
func (j *Journal) Standing(ctx context.Context) Standing {
	r := j.Replica()
	if r == nil {
		return Standing{Leads: true}
	}
	if t := j.takenOver(); t != nil {
		return Standing{TakenOver: t, Err: fmt.Errorf("%w: %v", ErrFenced, t)}
	}
	if r.IsLeader() {
		err := r.VerifyLeader(ctx)
		if err == nil {
			return Standing{Leads: true}
		}
		s := j.follower(r)
		s.Err = err
		return s
	}
	s := j.follower(r)
	s.Err = fmt.Errorf("replica %s is not the raft leader", j.cfg.Node)
	return s
}

func (j *Journal) follower(r *raftstore.Replica) Standing {
	id, _ := r.Leader()
	s := Standing{Leader: string(id), Leaderless: r.Leaderless()}
	if s.Leader == j.cfg.Node {
		s.Leader = ""
	}
	return s
}

// takenOver returns the root that took the place of this journal's writer,
// as its replica's state records it (nil: none). A front-end's writer is
// never named in the state (it does not take over), so any root named is
// its successor; a successor's is named until another took over from it.
func (j *Journal) takenOver() *Takeover {
	r := j.replica
	if j.cfg.Replica != nil {
		r = j.cfg.Replica
	}
	if r == nil {
		return nil
	}
	var t *Takeover
	r.FSM().View(func(s *raftstore.State) {
		if s.Leader != "" && s.Leader != j.cfg.Node {
			t = &Takeover{Leader: s.Leader, Term: s.LeaderTerm, Epoch: s.Epoch}
		}
	})
	return t
}

// Abandon stops the journal without committing a final status, and shuts
// its replica down: for a root that learned it was deposed (another
// replica took the root over, or it is cut off from its group), whose
// successor records the job's end. Records queued and not written are
// dropped. Later calls of Abandon or Close return at once.
func (j *Journal) Abandon(ctx context.Context) error {
	j.mu.Lock()
	j.closing = true
	j.mu.Unlock()
	j.relOnce.Do(func() { close(j.release) })
	j.cancel()
	select {
	case <-j.done:
	case <-ctx.Done():
		return fmt.Errorf("journal: abandon: %w", ctx.Err())
	}
	return nil
}
