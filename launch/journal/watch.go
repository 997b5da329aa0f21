package journal

// A replicated front-end's watch on its own standing in the root group
// (docs/state.md, "A front-end that lost the lead"). The front-end is the
// root only while its replica leads the group: paused past raft's lease
// (a GC pause, VM steal, SIGSTOP) or cut off from the replica agents, it
// is deposed, and the agents' replicas elect one of theirs. From then on
// it acts on nothing — link ends, exits, expired timers wait, and so do
// the journal's writes (NewWatch) — until it leads again (the replica agent that
// leads hands the lead back to a front-end it hears from: launch/agent's
// watchLeadership), or learns that a replica agent took the root over
// (the state log's epoch bump naming it, or the live report it writes),
// or stays deposed for twice as long as the agents take to declare a
// silent front-end lost while the group's other voters that are up make
// a majority (its raft traffic is cut, not its tree): then it steps
// aside. While those voters are too few to elect without it, it is the
// only root there can be, and holds nothing. Having stepped
// aside it never coordinates again: its links to the root's children
// close without a word (they ask the replica agents to adopt them, as
// after the front-end's death), its state log is abandoned without a
// final status, and ftlaunch run follows the job as attach does.

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// StandingPoll is how often a deposed front-end looks at the group.
const StandingPoll = 100 * time.Millisecond

// stallGap is how late the loop's look at its standing (every
// StandingPoll) must be for the front-end to take itself for stalled: the
// next event asks a quorum whether it still leads. Otherwise raft's own
// word is taken (a leader that cannot reach a quorum steps down within
// its lease, 125 ms), which costs nothing.
const stallGap = 3 * StandingPoll

// WatchConfig is what a Watch is given by its front-end.
type WatchConfig struct {
	Node string // the front-end's node, as its live report names the root
	// StepAsideAfter is how long a deposed front-end waits to lead again
	// while the other voters could lead without it, before it steps aside.
	StepAsideAfter time.Duration
	// Alive names the replica agents whose links are up now.
	Alive func() map[string]bool
	// Warnf and Verbosef say what the watch finds (the user's words;
	// Verbosef's with --verbose).
	Warnf, Verbosef func(format string, args ...any)
	// Leads, if set, is told when the front-end is deposed (false) or
	// leads again (true), by Group's Hold and Replay; never once it
	// stepped aside.
	Leads func(leads bool)
}

// Watch is the front-end's watch on its lead of the root group: whether
// it leads, is deposed (since when), or stepped aside. Owned by one
// goroutine (the root's loop).
type Watch struct {
	j      *Journal
	cfg    WatchConfig
	looked time.Time // when the loop last looked, or a quorum said it leads
	since  time.Time // deposed since (zero: it leads)
	aside  *SteppedAside
	held   []any // the events held while deposed, in order (Keep)
}

// NewWatch watches the lead of j's replica. From then on a write of j
// that finds its replica deposed waits for it to lead again for as long
// as the journal lasts (not Config.Regain): the caller holds its events
// meanwhile, carries on once it leads, and abandons the journal once it
// steps aside; a takeover (ErrFenced) and a lost majority (ErrNoMajority)
// still end the write.
func NewWatch(j *Journal, cfg WatchConfig) *Watch {
	j.mu.Lock()
	j.watched = true
	j.mu.Unlock()
	return &Watch{j: j, cfg: cfg}
}

// SteppedAside is how a front-end that lost the lead of its root group for
// good left the job: a replica agent runs its root (Leader, in raft term
// Term: both unknown for a front-end that was cut off), and ftlaunch run
// follows the job in its state directory JobDir.
type SteppedAside struct {
	JobDir string
	Leader string
	Term   uint64
	Why    string
}

// Aside is how the front-end stepped aside (nil: it did not).
func (w *Watch) Aside() *SteppedAside { return w.aside }

// Deposed reports whether the front-end is deposed (or stepped aside).
func (w *Watch) Deposed() bool { return !w.since.IsZero() || w.aside != nil }

// Hold reports whether the root must not act on an event now: it stepped
// aside (the event is dropped), or it does not lead while the other
// voters could (the event is held, and handled once the front-end leads
// again). Deposed in a group whose other voters are too few to lead
// without it (a group of two voters, or voters lost), the front-end is the
// only root there can be: the event is handled, and the state log's
// writes wait for its replica or fail.
func (w *Watch) Hold(ctx context.Context) bool {
	if w.since.IsZero() {
		r := w.j.Replica()
		if r == nil || r.IsLeader() && time.Since(w.looked) < stallGap {
			return false
		}
		if w.confirmLead(ctx) {
			return false
		}
	}
	if w.aside != nil {
		return true
	}
	_, _, ok := w.othersCanLead()
	return ok
}

// Keep is Hold for the root's event ev: held, it is kept (in order) and
// handed back by Replay once the front-end may act again; dropped once it
// stepped aside.
func (w *Watch) Keep(ctx context.Context, ev any) bool {
	held := w.Hold(ctx)
	if held && w.aside == nil {
		w.held = append(w.held, ev)
	}
	return held
}

// Replay is Look, and the events kept meanwhile when they are to be
// handled now (in order); none once it stepped aside.
func (w *Watch) Replay(ctx context.Context) []any {
	replay := w.Look(ctx)
	if !replay || w.aside != nil {
		if w.aside != nil {
			w.held = nil
		}
		return nil
	}
	held := w.held
	w.held = nil
	return held
}

// confirmLead asks the group whether the front-end still leads; if not, it
// is deposed from now on.
func (w *Watch) confirmLead(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	st := w.j.Standing(ctx)
	cancel()
	if st.Leads {
		w.looked = time.Now()
		return true
	}
	w.since = time.Now()
	_, _, othersLead := w.tellMajorityAlive()
	leader := "none it knows"
	if st.Leader != "" {
		leader = st.Leader
	}
	if othersLead || st.TakenOver != nil {
		w.cfg.Warnf("the front-end's replica does not lead the root group (its leader: %s): acting on nothing until it leads again (%v)", leader, st.Err)
	} else {
		// No other root can be elected: a leadership blip of the
		// front-end's own (its replica elects itself again), or a lost
		// majority (its writes say so).
		w.cfg.Verbosef("the front-end's replica does not lead the root group, whose other voters could not lead without it (%v)", st.Err)
	}
	if st.TakenOver != nil {
		w.stepAside(st.TakenOver.Leader, st.TakenOver.Term, st.TakenOver.String())
	}
	return false
}

// Look is the front-end's look at the group, every StandingPoll: leading
// as far as it knows, it checks raft's word; deposed, it leads again, a
// replica agent took over (it steps aside), or it stayed deposed too long
// (it steps aside). Replay: the events held meanwhile are to be handled
// now (it leads again, or the other voters are too few to lead without
// it).
func (w *Watch) Look(ctx context.Context) (replay bool) {
	if w.aside != nil {
		return false
	}
	if w.since.IsZero() {
		// Leading as far as the loop knows: raft says at once when its
		// replica stepped down (its lease ran out: cut off), even if no
		// event came that asks a quorum.
		if r := w.j.Replica(); r != nil && (!r.IsLeader() || time.Since(w.looked) > stallGap) {
			w.confirmLead(ctx)
		} else {
			w.looked = time.Now()
		}
		return false
	}
	if l, err := ReadLive(w.j.Dir()); err == nil && l.Root != w.cfg.Node && l.Failover {
		w.stepAside(l.Root, l.Term, fmt.Sprintf("node %s took over as root in term %d (its live report)", l.Root, l.Term))
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	st := w.j.Standing(ctx)
	cancel()
	switch {
	case st.TakenOver != nil:
		w.stepAside(st.TakenOver.Leader, st.TakenOver.Term, st.TakenOver.String())
	case st.Leads:
		w.cfg.Warnf("the front-end's replica leads the root group again after %.1f s: going on", time.Since(w.since).Seconds())
		w.since, w.looked = time.Time{}, time.Now()
		return true
	default:
		up, need, ok := w.tellMajorityAlive()
		switch {
		case !ok:
			// Too few other voters are up to lead without the
			// front-end: the events are handled (Hold).
			return true
		case time.Since(w.since) > w.cfg.StepAsideAfter:
			w.stepAside("", 0, fmt.Sprintf("the front-end's replica has not led the root group for %.1f s while %d of its other voters are up (%d make a majority): it is cut off from them",
				time.Since(w.since).Seconds(), up, need))
		}
	}
	return false
}

// tellMajorityAlive counts the voters as othersCanLead does, returns its
// figures, and tells the journal whether the front-end and the replica
// agents whose links are up make a majority of the group: a leaderless
// group of live voters is slow (a loaded machine), not lost, and its
// writes wait longer before they fail (MajorityAlive).
func (w *Watch) tellMajorityAlive() (up, need int, ok bool) {
	up, need, ok = w.othersCanLead()
	w.j.MajorityAlive(need > 0 && up+1 >= need)
	return up, need, ok
}

// othersCanLead counts the group's voters other than the front-end's
// whose agents' links are up, and how many voters make a majority of the
// group; ok: those voters could elect a leader without the front-end.
func (w *Watch) othersCanLead() (up, need int, ok bool) {
	r := w.j.Replica()
	if r == nil {
		return 0, 0, false
	}
	f := r.Raft().GetConfiguration()
	if f.Error() != nil {
		return 0, 0, false
	}
	alive := w.cfg.Alive()
	voters := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage != raft.Voter {
			continue
		}
		voters++
		if alive[string(srv.ID)] {
			up++
		}
	}
	need = voters/2 + 1
	return up, need, up >= need
}

// stepAside ends the front-end's part as root: its state log is abandoned
// without a final status (the successor's to commit). The front-end's own
// part (its links, its loop) follows once it sees Aside.
func (w *Watch) stepAside(leader string, term uint64, why string) {
	if w.aside != nil {
		return
	}
	w.aside = &SteppedAside{JobDir: w.j.Dir(), Leader: leader, Term: term, Why: why}
	w.cfg.Warnf("the front-end steps aside: %s; it never coordinates this job again", why)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := w.j.Abandon(ctx); err != nil {
		w.cfg.Warnf("job state log: %v", err)
	}
}
