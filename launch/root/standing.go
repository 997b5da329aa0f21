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
// or stays deposed for as long as the agents take to declare a silent
// front-end lost while a majority of the replica agents are up (its raft
// traffic is cut, not its tree): then it steps aside. Having stepped
// aside it never coordinates again: its links to the root's children
// close without a word (they ask the replica agents to adopt them, as
// after the front-end's death), its state log is abandoned without a
// final status, and ftlaunch run follows the job as attach does.

import (
	"context"
	"fmt"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// standingPoll is how often a deposed front-end looks at the group.
const standingPoll = 100 * time.Millisecond

// verifyFresh is how long a quorum's word that the front-end leads holds
// for the events that follow it. Shorter than raft's lease (125 ms): a
// stall longer than that makes the next event ask again.
const verifyFresh = 100 * time.Millisecond

// standing is the front-end's watch; the root's loop owns it.
type standing struct {
	verified time.Time // when a quorum last said the front-end leads
	since    time.Time // deposed since (zero: it leads)
	held     []event   // events held while deposed, in order
	off      bool      // the group lost its majority: no more watch
	aside    *SteppedAside
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
// front-end does not lead (it is held, and handled once it does).
func (fe *frontend) hold(ev event) bool {
	s := fe.stand
	if s == nil || s.off || fe.journalDone || harmless(ev) {
		// The job's end is being committed (or was): it is decided, and
		// its state log's replica shuts down.
		return false
	}
	if s.since.IsZero() {
		if time.Since(s.verified) < verifyFresh {
			return false
		}
		if fe.confirmLead() {
			return false
		}
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
		s.verified = time.Now()
		return true
	}
	s.since = time.Now()
	leader := "none it knows"
	if st.Leader != "" {
		leader = st.Leader
	}
	fe.warnf("the front-end's replica does not lead the root group (its leader: %s): acting on nothing until it leads again (%v)", leader, st.Err)
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
	if s == nil || s.off || s.aside != nil || fe.journalDone {
		return
	}
	if s.since.IsZero() {
		// Leading as far as the loop knows: raft says at once when its
		// replica stepped down (its lease ran out: cut off), even if no
		// event came that asks a quorum.
		if r := fe.journal.Replica(); r != nil && !r.IsLeader() {
			fe.confirmLead()
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
		s.since, s.verified = time.Time{}, time.Now()
		fe.replayHeld()
	case time.Since(s.since) > fe.stepAsideAfter():
		up, need := fe.replicaAgentsUp()
		if up >= need {
			fe.stepAside("", 0, fmt.Sprintf("the front-end's replica has not led the root group for %.1f s while %d replica agent(s) are up (a majority of the group without it): it is cut off from them",
				time.Since(s.since).Seconds(), up))
			return
		}
		// Too few replica agents are up for the group to elect without
		// the front-end: it lost its majority, and the state log's
		// writes say so (docs/state.md).
		fe.warnf("the root group lost its majority (%d replica agent(s) up, %d needed without the front-end): going on without a state log", up, need)
		s.off = true
		s.since = time.Time{}
		fe.replayHeld()
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
// before it steps aside: as long as the agents take to declare a silent
// front-end lost (its link's timeout), after which a replica agent would
// have taken over had it been stalled rather than cut off.
func (fe *frontend) stepAsideAfter() time.Duration {
	return proto.LinkTimeout(fe.opts.Heartbeat)
}

// replicaAgentsUp counts the replica agents whose links to the front-end
// are up, and how many of them make a majority of the group without the
// front-end's voter.
func (fe *frontend) replicaAgentsUp() (up, need int) {
	for i := range fe.replicaNodes {
		if a := fe.agents[i]; a.replica && !a.closed && !a.done {
			up++
		}
	}
	return up, max(fe.opts.Replicas, 1)/2 + 1
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
