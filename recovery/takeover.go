package recovery

// A successor's bounds on the lost root's children (docs/design.md, "The
// planner"): after StartWait (StartDue) it starts those the front-end had
// never started (StartChildren); after its adoption's bound (AdoptDue) it
// gives up those that did not ask it to adopt them (Unadopted). The root
// keeps the clocks and carries out both.

import (
	"slices"
	"time"
)

// StartWait is how long a successor waits for the lost root's children to
// ask for adoption before it starts those that were never recorded up;
// AdoptMargin how much longer than their own bound on finding a new root
// it waits before it gives up those that did not ask (AdoptDue).
const (
	StartWait   = time.Second
	AdoptMargin = 5 * time.Second
)

// StartDue: a successor waited StartWait since it took over.
type StartDue struct{}

// ProbePeers: look whether the agents of these replica hosts are gone:
// children of the lost root (not this root's own) that did not ask to be
// adopted, the root before this one most often (a second failover), which
// died with its agent and its ranks. A refused connection says so at once;
// the adoption's bound would leave their ranks' neighbours waiting.
type ProbePeers struct{ Agents []int }

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

// PeersGone: the replica agents on Nodes are gone: this root's agent
// reported to their root (a successor before this one) until its link to
// it ended, not fell silent: their process ended, their agent and ranks
// with it.
type PeersGone struct{ Nodes []string }

// PeersLost: the children of the lost root among PeersGone's (not this
// root's own agent, not adopted, not lost already): declared lost at once,
// the agents below them moving to their backup parents meanwhile, where
// waiting for ProbePeers would leave them that much less of the root's
// bound for it (OrphanWait).
type PeersLost struct{ Agents []int }

func (PeersGone) isEvent()      {}
func (PeersLost) isAction()     {}
func (StartDue) isEvent()       {}
func (AdoptDue) isEvent()       {}
func (ProbePeers) isAction()    {}
func (StartChildren) isAction() {}
func (Unadopted) isAction()     {}

// peersGone decides which children of the lost root PeersGone loses.
func (p *Planner) peersGone(ev PeersGone) []Action {
	var lost []int
	for _, node := range ev.Nodes {
		for a, l := range p.links {
			if p.agents[a].node == node && node != p.cfg.RootNode && p.rootChild(a) && !l.adopted && !l.closed {
				lost = append(lost, a)
			}
		}
	}
	if len(lost) == 0 {
		return nil
	}
	return []Action{PeersLost{Agents: lost}}
}

// takeover decides a successor's StartDue (the replica hosts to probe,
// then the children to start: none once the job is ending) and AdoptDue;
// a front-end's planner decides neither.
func (p *Planner) takeover(ev Event) []Action {
	if !p.cfg.Resumed {
		return nil
	}
	var probe, start, unadopted []int
	for a, l := range p.links {
		if !p.rootChild(a) || l.adopted || l.closed {
			continue
		}
		unadopted = append(unadopted, a)
		if slices.Contains(p.cfg.ReplicaHosts, a) && p.agents[a].node != p.cfg.RootNode {
			probe = append(probe, a)
		}
		if !l.up && !p.Ending() {
			start = append(start, a)
		}
	}
	if _, due := ev.(StartDue); !due {
		if len(unadopted) == 0 {
			return nil
		}
		return []Action{Unadopted{Agents: unadopted}}
	}
	var acts []Action
	if len(probe) > 0 {
		acts = append(acts, ProbePeers{Agents: probe})
	}
	if len(start) > 0 {
		acts = append(acts, StartChildren{Agents: start})
	}
	return acts
}
