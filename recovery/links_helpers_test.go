package recovery

import "github.com/ftlaunch/ftlaunch/topology"

// haveLink sets the planner's link to agent a as the root would hold it
// now: the tests' shorthand for the events that led there (AgentUp,
// AgentDone, FallbacksTold, a loss, a relaunch). RootChild is the tree's.
func (p *Planner) haveLink(a int, l AgentLink) {
	inc := l.Inc
	if inc == 0 {
		inc = p.links[a].inc
	}
	p.links[a] = link{up: l.Up, closed: l.Closed, done: l.Done, adopted: l.Adopted, inc: inc, fallbacks: l.Fallbacks, backup: topology.None}
}

// haveLinks sets every link (haveLink).
func (p *Planner) haveLinks(ls []AgentLink) {
	for a, l := range ls {
		p.haveLink(a, l)
	}
}

// allUp is every one of n agents up, for Config.Up.
func allUp(n int) []bool {
	up := make([]bool, n)
	for i := range up {
		up[i] = true
	}
	return up
}
