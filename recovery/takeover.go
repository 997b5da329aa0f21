package recovery

// A successor's bounds on the lost root's children (docs/design.md, "The
// planner"): after StartWait (StartDue) it starts those the front-end had
// never started (StartChildren); after its adoption's bound (AdoptDue) it
// gives up those that did not ask it to adopt them (Unadopted). The root
// keeps the clocks and carries out both.

import "time"

// StartWait is how long a successor waits for the lost root's children to
// ask for adoption before it starts those that were never recorded up.
const StartWait = time.Second

// StartDue: a successor waited StartWait since it took over.
type StartDue struct{}

// StartChildren: start the children of the lost root that were never up,
// nor adopted, nor lost: the front-end died before it started them (or
// before they connected). Their subtrees follow as usual.
type StartChildren struct{ Agents []int }

// AdoptDue: a successor's bound on the lost root's children asking it for
// adoption passed.
type AdoptDue struct{}

// Unadopted: the children of the lost root that did not ask the successor
// to adopt them in time and whose link has not ended: their links are
// declared ended (a loss).
type Unadopted struct{ Agents []int }

func (StartDue) isEvent()       {}
func (AdoptDue) isEvent()       {}
func (StartChildren) isAction() {}
func (Unadopted) isAction()     {}

// takeover decides a successor's StartDue and AdoptDue: nothing for a
// front-end, nothing to start once the job is ending.
func (p *Planner) takeover(ev Event) []Action {
	if !p.cfg.Resumed {
		return nil
	}
	_, start := ev.(StartDue)
	if start && p.Ending() {
		return nil
	}
	var agents []int
	for a, l := range p.links {
		if p.rootChild(a) && !l.adopted && !l.closed && (!start || !l.up) {
			agents = append(agents, a)
		}
	}
	if len(agents) == 0 {
		return nil
	}
	if start {
		return []Action{StartChildren{Agents: agents}}
	}
	return []Action{Unadopted{Agents: agents}}
}
