package recovery

import (
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// Gossip's word on a death (docs/membership.md). With a launch tree, the
// front-end's gossip member hears every death the cluster agrees on,
// usually 1-2 s after a crash, while the tree's heartbeat takes 5 s.
// Gossip's "dead" is evidence, not a verdict: the planner declares an
// agent lost on it only when the link that would tell otherwise is silent:
//
//   - a child of the root: once the root's link to it has been quiet for
//     longer than a heartbeat interval and a margin (proto.Link's
//     ConfirmSilence, whose figures the root gives: Left is how long until
//     the silence is long enough); still speaking, it is looked at again
//     when it would be (CheckAgain), and kept if it spoke meanwhile, but
//     watched: gossip's word stands (memberlist never takes a member it
//     declared dead back by itself, so no new word would come), and the
//     link's silence alone condemns it from then on, looked at each time
//     the silence would be long enough (CheckAgain again);
//   - an agent below another: its parent holds the link and is asked to
//     look at it, and to watch it the same way (Suspect);
//   - a successor's child of the root that has not asked for adoption
//     AdoptQuiet after the successor took over: it will not ask.
//
// Stale evidence (an incarnation other than the root's, an agent whose
// link ended or that is done) and a job that is ending change nothing.

// AdoptQuiet is how long after a successor took over a child of the root
// that did not ask for adoption may be declared lost on gossip alone.
const AdoptQuiet = 2 * time.Second

// GossipDead: the root's gossip member says agent Agent is dead. The
// root's facts on its link's I/O come with it.
type GossipDead struct {
	Agent       int
	Incarnation uint64 // gossip's (0: the first)
	// Linked: the root holds a link to it (a child of the root's). Since
	// is how long ago this root began (a successor: took over).
	Linked bool
	Since  time.Duration
	// Quiet is how long its link has been quiet, Left how much longer it
	// must be for the silence to confirm a death (≤ 0: confirmed).
	Quiet, Left time.Duration
	// Again: the look CheckAgain asked for.
	Again bool
}

func (GossipDead) isEvent() {}

// Suspect: ask Parent to look at the link of its child Agent, which
// gossip says is dead.
type Suspect struct{ Agent, Parent int }

// DeclareLost: gossip's word on Agent is confirmed, by the silence of the
// root's link to it (Linked: the root closes that link), or because it did
// not ask a successor to adopt it: it is lost.
type DeclareLost struct {
	Agent  int
	Linked bool
}

// CheckAgain: gossip says Agent is dead but its link spoke Quiet ago:
// step the same GossipDead (Again) once After passed, the time until the
// silence would condemn it. Watched: it was kept once already (KeptAlive).
type CheckAgain struct {
	Agent        int
	Quiet, After time.Duration
	Watched      bool
}

// KeptAlive: gossip said Agent was dead, but its link spoke Quiet ago:
// kept, and watched from now on (the planner remembers it, for that
// incarnation).
type KeptAlive struct {
	Agent int
	Quiet time.Duration
}

func (Suspect) isAction()     {}
func (DeclareLost) isAction() {}
func (CheckAgain) isAction()  {}
func (KeptAlive) isAction()   {}

// gossipDead decides what gossip's word on an agent does.
func (p *Planner) gossipDead(ev GossipDead) []Action {
	l := p.linkOf(ev.Agent)
	if p.Ending() || l == nil || l.closed || l.done || !l.up {
		return nil
	}
	if !ev.Again && max(ev.Incarnation, 1) != max(l.inc, 1) {
		return nil // stale: the planner has heard of its end
	}
	parent := topology.Root
	if p.cfg.Tree != nil && ev.Agent >= 0 && ev.Agent < p.cfg.Tree.N() {
		parent = p.cfg.Tree.Parent(ev.Agent)
	}
	switch {
	case ev.Again:
	case parent == topology.Root && p.cfg.Resumed && !ev.Linked && !l.adopted && ev.Since > AdoptQuiet:
		// A successor's child of the root that did not ask to be adopted.
		return []Action{DeclareLost{Agent: ev.Agent}}
	case parent != topology.Root:
		return []Action{Suspect{Agent: ev.Agent, Parent: parent}}
	case !ev.Linked:
		return nil
	}
	watched := ev.Agent >= 0 && ev.Agent < len(p.agents) && p.agents[ev.Agent].watched == max(l.inc, 1)
	switch {
	case ev.Left <= 0:
		return []Action{DeclareLost{Agent: ev.Agent, Linked: true}}
	case !ev.Again && watched:
		return nil // watched already: its looks go on
	case ev.Again && !watched:
		if ev.Agent >= 0 && ev.Agent < len(p.agents) {
			p.agents[ev.Agent].watched = max(l.inc, 1)
		}
		return []Action{KeptAlive{Agent: ev.Agent, Quiet: ev.Quiet}, CheckAgain{Agent: ev.Agent, Quiet: ev.Quiet, After: ev.Left}}
	}
	return []Action{CheckAgain{Agent: ev.Agent, Quiet: ev.Quiet, After: ev.Left, Watched: watched}}
}
