package root

// A replicated front-end's watch on its own standing in the root group:
// journal.Watch decides whether it leads, is deposed or steps aside
// (docs/state.md, "A front-end that lost the lead"); the root holds the
// events it must not act on meanwhile, and carries out its part of
// stepping aside.

import (
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// standingPoll is how often the loop looks at its standing.
const standingPoll = journal.StandingPoll

// SteppedAside is how a front-end that lost the lead of its root group for
// good left the job (journal.SteppedAside).
type SteppedAside = journal.SteppedAside

// standing is a replicated front-end's (nil: a successor, or one
// replica); aside is set once it stepped aside: the loop ends.
type standing struct{ aside *SteppedAside }

// newStanding has the group watch the front-end's lead.
func (fe *frontend) newStanding() *standing {
	fe.journal.Watch(journal.WatchConfig{
		Node: fe.rootNode,
		// Twice as long as the agents take to declare a silent front-end
		// lost (its link's timeout), after which a replica agent would
		// have taken over had it been stalled rather than cut off. Once
		// would do on an idle machine; on a loaded one (two cores shared
		// by several jobs) a group of three went without a leader the
		// front-end knew for 5 s, terms churning, while nothing was cut.
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
	})
	return &standing{}
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

// LeadChanged (an Event): the front-end's replica stopped leading its root
// group (Leads false: the front-end is deposed, and acts on nothing
// meanwhile) or leads it again (Leads true: it goes on).
type LeadChanged struct{ Leads bool }

func (LeadChanged) isObserved() {}

// hold reports whether the root's loop must not handle ev now
// (journal.Group.Hold): it is held, and handled once the front-end leads
// again, or dropped once it stepped aside.
func (fe *frontend) hold(ev event) bool {
	was := fe.deposed()
	held := fe.journal.Hold(fe.ctx, ev, harmless(ev))
	fe.toldStanding(was)
	fe.stepAside()
	return held
}

// toldStanding tells the observer when the front-end's look at its
// standing deposed it, or found it leading again (was: deposed before).
func (fe *frontend) toldStanding(was bool) {
	if now := fe.deposed(); now != was && fe.stand != nil && fe.stand.aside == nil {
		fe.observe(LeadChanged{Leads: !now})
	}
}

// deposed reports whether the front-end is deposed (or stepped aside).
func (fe *frontend) deposed() bool { return fe.journal.Deposed() }

// checkStanding is the loop's look at the group, every standingPoll
// (journal.Group.Replay): the held events are handled once it leads again.
func (fe *frontend) checkStanding() {
	was := fe.deposed()
	replay := fe.journal.Replay(fe.ctx)
	fe.toldStanding(was)
	fe.stepAside()
	for _, ev := range replay {
		fe.handle(ev.(event))
	}
}

// stepAside carries out the root's part once its watch stepped aside
// (journal.Group.StepAside): the loop returns (run follows the job as a
// client), and its links to the root's children close without a word
// (they ask the replica agents to adopt them).
func (fe *frontend) stepAside() {
	aside := fe.journal.StepAside()
	if aside == nil {
		return
	}
	fe.stand.aside = aside
	for _, a := range fe.agents {
		if fe.rootChild(a) && a.link != nil && !fe.link(a).Closed {
			_ = a.link.Conn.Close()
		}
	}
}
