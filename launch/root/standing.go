package root

// A replicated front-end's watch on its own standing in the root group
// (docs/state.md, "A front-end that lost the lead"). The front-end is the
// root only while its replica leads the group: paused past raft's lease
// (a GC pause, VM steal, SIGSTOP) or cut off from the replica agents, it
// is deposed, and the agents' replicas elect one of theirs. From then on
// it acts on nothing — link ends, exits, expired timers, phases that could
// not be committed wait — until it leads again (the replica agent that
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

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// standingPoll is how often a deposed front-end looks at the group.
const standingPoll = 100 * time.Millisecond

// stallGap is how late the loop's look at its standing (every
// standingPoll) must be for the front-end to take itself for stalled: the
// next event asks a quorum whether it still leads. Otherwise raft's own
// word is taken (a leader that cannot reach a quorum steps down within
// its lease, 125 ms), which costs nothing.
const stallGap = 3 * standingPoll

// standing is the front-end's watch; the root's loop owns it.
type standing struct {
	looked time.Time // when the loop last looked, or a quorum said it leads
	since  time.Time // deposed since (zero: it leads)
	held   []event   // events held while deposed, in order
	aside  *SteppedAside
}

// harmless reports whether ev can be handled whoever leads: the ranks'
// output (the user's session) and stdin's credit.
func harmless(ev event) bool {
	m, ok := ev.(evMessage)
	if !ok {
		return false
	}
	switch m.typ {
	case proto.MOutput, proto.MOutputResync, proto.MStdinAck:
		return true
	}
	return false
}

// hold reports whether the root's loop must not handle ev now: the
// front-end does not lead while the other voters could (it is held, and
// handled once the front-end leads again). Deposed in a group whose other
// voters are too few to lead without it (a group of two voters, or
// voters lost), the front-end is the only root there can be: ev is
// handled, and the state log's writes wait for its replica or fail.
func (fe *frontend) hold(ev event) bool {
	s := fe.stand
	if s == nil || fe.journalDone || harmless(ev) {
		// The job's end is being committed (or was): it is decided, and
		// its state log's replica shuts down.
		return false
	}
	if s.since.IsZero() {
		r := fe.journal.Replica()
		if r == nil || r.IsLeader() && time.Since(s.looked) < stallGap {
			return false
		}
		if fe.confirmLead() {
			return false
		}
	}
	if s.aside != nil {
		return true // dropped: the loop ends
	}
	if _, _, ok := fe.othersCanLead(); !ok {
		return false
	}
	s.held = append(s.held, ev)
	return true
}

// confirmLead asks the group whether the front-end still leads; if not, it
// is deposed from now on.
func (fe *frontend) confirmLead() bool {
	s := fe.stand
	ctx, cancel := context.WithTimeout(fe.ctx, time.Second)
	st := fe.journal.Standing(ctx)
	cancel()
	if st.Leads {
		s.looked = time.Now()
		return true
	}
	s.since = time.Now()
	_, _, othersLead := fe.tellMajorityAlive()
	leader := "none it knows"
	if st.Leader != "" {
		leader = st.Leader
	}
	if othersLead || st.TakenOver != nil {
		fe.warnf("the front-end's replica does not lead the root group (its leader: %s): acting on nothing until it leads again (%v)", leader, st.Err)
	} else {
		// No other root can be elected: a leadership blip of the
		// front-end's own (its replica elects itself again), or a lost
		// majority (its writes say so).
		fe.verbosef("the front-end's replica does not lead the root group, whose other voters could not lead without it (%v)", st.Err)
	}
	if st.TakenOver != nil {
		fe.stepAside(st.TakenOver.Leader, st.TakenOver.Term, st.TakenOver.String())
	}
	return false
}

// deposed reports whether the front-end is deposed (or stepped aside).
func (fe *frontend) deposed() bool {
	return fe.stand != nil && (!fe.stand.since.IsZero() || fe.stand.aside != nil)
}

// checkStanding is the deposed front-end's look at the group, every
// standingPoll: it leads again (the held events are handled), a replica
// agent took over (it steps aside), or it stayed deposed too long.
func (fe *frontend) checkStanding() {
	s := fe.stand
	if s == nil || s.aside != nil || fe.journalDone {
		return
	}
	if s.since.IsZero() {
		// Leading as far as the loop knows: raft says at once when its
		// replica stepped down (its lease ran out: cut off), even if no
		// event came that asks a quorum.
		if r := fe.journal.Replica(); r != nil && (!r.IsLeader() || time.Since(s.looked) > stallGap) {
			fe.confirmLead()
		} else {
			s.looked = time.Now()
		}
		return
	}
	if l, err := journal.ReadLive(fe.journal.Dir()); err == nil && l.Root != fe.rootNode && l.Failover {
		fe.stepAside(l.Root, l.Term, fmt.Sprintf("node %s took over as root in term %d (its live report)", l.Root, l.Term))
		return
	}
	ctx, cancel := context.WithTimeout(fe.ctx, time.Second)
	st := fe.journal.Standing(ctx)
	cancel()
	switch {
	case st.TakenOver != nil:
		fe.stepAside(st.TakenOver.Leader, st.TakenOver.Term, st.TakenOver.String())
	case st.Leads:
		fe.warnf("the front-end's replica leads the root group again after %.1f s: going on", time.Since(s.since).Seconds())
		s.since, s.looked = time.Time{}, time.Now()
		fe.replayHeld()
	default:
		up, need, ok := fe.tellMajorityAlive()
		switch {
		case !ok:
			// Too few other voters are up to lead without the
			// front-end: the events are handled (hold).
			fe.replayHeld()
		case time.Since(s.since) > fe.stepAsideAfter():
			fe.stepAside("", 0, fmt.Sprintf("the front-end's replica has not led the root group for %.1f s while %d of its other voters are up (%d make a majority): it is cut off from them",
				time.Since(s.since).Seconds(), up, need))
		}
	}
}

// replayHeld handles the events held while the front-end was deposed.
func (fe *frontend) replayHeld() {
	s := fe.stand
	held := s.held
	s.held = nil
	for _, ev := range held {
		fe.handle(ev)
	}
}

// stepAsideAfter is how long a deposed front-end waits to lead again
// before it steps aside: twice as long as the agents take to declare a
// silent front-end lost (its link's timeout), after which a replica agent
// would have taken over had it been stalled rather than cut off. Once
// would do on an idle machine; on a loaded one (two cores shared by
// several jobs) a group of three went without a leader the front-end knew
// for 5 s, terms churning, while nothing was cut.
func (fe *frontend) stepAsideAfter() time.Duration {
	return 2 * proto.LinkTimeout(fe.opts.Heartbeat)
}

// tellMajorityAlive counts the voters as othersCanLead does, returns its
// figures, and tells the journal whether the front-end and the replica
// agents whose links are up make a majority of the group: a leaderless
// group of live voters is slow (a loaded machine), not lost, and its
// writes wait longer before they fail (journal.MajorityAlive).
func (fe *frontend) tellMajorityAlive() (up, need int, ok bool) {
	up, need, ok = fe.othersCanLead()
	fe.journal.MajorityAlive(need > 0 && up+1 >= need)
	return up, need, ok
}

// othersCanLead counts the group's voters other than the front-end's
// whose agents' links are up, and how many voters make a majority of the
// group; ok: those voters could elect a leader without the front-end.
func (fe *frontend) othersCanLead() (up, need int, ok bool) {
	r := fe.journal.Replica()
	if r == nil {
		return 0, 0, false
	}
	f := r.Raft().GetConfiguration()
	if f.Error() != nil {
		return 0, 0, false
	}
	alive := map[string]bool{}
	for _, a := range fe.agents {
		if a.replica && !a.closed && !a.done {
			alive[a.name] = true
		}
	}
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

// stepAside ends the front-end's part as root: the loop returns (run
// follows the job as a client), its links to the root's children close
// without a word (they ask the replica agents to adopt them), and its
// state log is abandoned without a final status.
func (fe *frontend) stepAside(leader string, term uint64, why string) {
	s := fe.stand
	if s.aside != nil {
		return
	}
	s.aside = &SteppedAside{JobDir: fe.journal.Dir(), Leader: leader, Term: term, Why: why}
	s.held = nil
	fe.warnf("the front-end steps aside: %s; it never coordinates this job again", why)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fe.journal.Abandon(ctx); err != nil {
		fe.warnf("job state log: %v", err)
	}
	fe.journalDone = true // no final status: the successor's
	if fe.raftTr != nil {
		fe.raftTr.Close()
	}
	for _, a := range fe.agents {
		if a.rootChild && a.link != nil && !a.closed {
			_ = a.link.Conn.Close()
		}
		a.closed = true
	}
}
