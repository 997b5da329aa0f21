package root

// A replicated front-end's watch on its standing in the root group:
// journal.Watch decides whether it leads, is deposed or steps aside
// (docs/state.md); the root holds its events meanwhile and does its part.

import (
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// SteppedAside is how a front-end that lost the lead of its root group for
// good left the job (journal.SteppedAside).
type SteppedAside = journal.SteppedAside

// LeadChanged (an Event): the front-end's replica stopped leading its root
// group (Leads false: the front-end is deposed, and acts on nothing
// meanwhile) or leads it again (Leads true: it goes on).
type LeadChanged struct{ Leads bool }

func (LeadChanged) isObserved() {}

// watchStanding has the group watch the front-end's lead (journal.Watch).
func (fe *frontend) watchStanding() {
	fe.journal.Watch(journal.WatchConfig{
		Node: fe.rootNode,
		// Twice the agents' bound for declaring a silent front-end lost:
		// once is enough on an idle machine, but a loaded one can leave a
		// group without a leader the front-end knows for seconds while
		// nothing was cut.
		StepAsideAfter: 2 * proto.LinkTimeout(fe.opts.Heartbeat),
		Alive: func() map[string]bool {
			alive := map[string]bool{}
			for _, a := range fe.agents {
				if l := fe.link(a); a.replica && !l.Closed && !l.Done {
					alive[a.name] = true
				}
			}
			return alive
		},
		Warnf: fe.warnf, Verbosef: fe.verbosef,
		Leads: func(leads bool) { fe.observe(LeadChanged{Leads: leads}) },
	})
}

// hold reports whether the root's loop must not handle ev now
// (journal.Group.Hold): it is held, and handled once the front-end leads
// again, or dropped once it stepped aside. The ranks' output and stdin's
// credit are handled whoever leads (proto.AnyLeader).
func (fe *frontend) hold(ev event) bool {
	m, ok := ev.(evMessage)
	held := fe.journal.Hold(fe.ctx, ev, ok && proto.AnyLeader(m.typ))
	fe.stepAside()
	return held
}

// deposed reports whether the front-end is deposed (or stepped aside).
func (fe *frontend) deposed() bool { return fe.journal.Deposed() }

// checkStanding is the loop's look at the group, every journal.StandingPoll
// (Group.Replay): the held events are handled once it leads again.
func (fe *frontend) checkStanding() {
	replay := fe.journal.Replay(fe.ctx)
	fe.stepAside()
	for _, ev := range replay {
		fe.handle(ev.(event))
	}
}

// stepAside carries out the root's part once its watch stepped aside
// (journal.Group.StepAside): its links to the root's children close
// without a word (they ask the replica agents to adopt them).
func (fe *frontend) stepAside() {
	if fe.journal.StepAside() == nil {
		return
	}
	for _, a := range fe.agents {
		if fe.rootChild(a) && a.link != nil && !fe.link(a).Closed {
			_ = a.link.Conn.Close()
		}
	}
}
