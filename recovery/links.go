package recovery

import (
	"slices"

	"github.com/ftlaunch/ftlaunch/topology"
)

// The root's links to the agents, planner state (docs/design.md, "What
// lives where for failures"): whether each agent is up (it got its share
// of the job), its link ended (declared lost, or it left), it said it was
// done, a successor took its link over (adopted), which parents beyond its
// backup it was told to try, and which backup parent its standby link is
// held to. The root tells the planner what its I/O saw (AgentUp,
// AgentDone, Adopted, FallbacksTold, BackupUp); the planner closes links
// itself when it declares agents lost (LoseSubtree, AgentLost), when a
// start failed (LaunchFailed, RelaunchFailed), and opens a new one when
// it starts an agent again (Relaunch, Start). The root reads them through
// one view (Links); the decisions that depend on them (orphans, the
// agents a recovery waits for, the launch's end, adoptions, gossip's word,
// the standby links and the backups told after a redeal) read the
// planner's own.

// AgentUp: the root gave agent Agent its share of the job (or found it up:
// a successor's adoption).
type AgentUp struct{ Agent int }

// AgentDone: agent Agent said it is done.
type AgentDone struct{ Agent int }

// Adopted: the root took agent Agent's link (an Adopt carried out).
type Adopted struct{ Agent int }

// FallbacksTold: agent Agent was told to try Parents beyond its backup
// (topology.Root: the root), in order.
type FallbacksTold struct {
	Agent   int
	Parents []int
}

// BackupUp: agent Agent holds its standby link to Backup.
type BackupUp struct{ Agent, Backup int }

func (AgentUp) isEvent()       {}
func (AgentDone) isEvent()     {}
func (Adopted) isEvent()       {}
func (FallbacksTold) isEvent() {}
func (BackupUp) isEvent()      {}

// StandbysUp: every agent with a backup parent holds its standby link to
// it (N of them): from now on no agent is lost with its parent.
type StandbysUp struct{ N int }

func (StandbysUp) isAction() {}

// link is one agent's link as the planner keeps it.
type link struct {
	up, closed, done, adopted bool
	inc                       uint64 // the incarnation the link is of (the root's handle's)
	fallbacks                 []int
	backup                    int // the backup its standby link is held to (topology.None: none said)
}

func newLinks(n int, up []bool, incs func(int) uint64) []link {
	ls := make([]link, n)
	for a := range ls {
		ls[a] = link{inc: incs(a), backup: topology.None, up: a < len(up) && up[a]}
	}
	return ls
}

func (l link) live() bool { return l.up && !l.closed && !l.done }

// linkStep takes what the root saw of a link.
func (p *Planner) linkStep(ev Event) []Action {
	switch ev := ev.(type) {
	case AgentUp:
		if l := p.linkOf(ev.Agent); l != nil {
			l.up = true
			// A successor that gave a child of the root its share holds
			// its link (it started it: the front-end had not): it is
			// this root's as an adopted one's is, not waited for.
			l.adopted = l.adopted || p.cfg.Resumed && p.rootChild(ev.Agent)
		}
	case AgentDone:
		if l := p.linkOf(ev.Agent); l != nil {
			l.done = true
		}
	case Adopted:
		if l := p.linkOf(ev.Agent); l != nil {
			l.adopted, l.up = true, true
		}
	case FallbacksTold:
		if l := p.linkOf(ev.Agent); l != nil {
			l.fallbacks = ev.Parents
		}
	case BackupUp:
		l := p.linkOf(ev.Agent)
		if l == nil {
			return nil
		}
		l.backup = ev.Backup
		if held, n := p.standbys(); p.cfg.Tree.Backup(ev.Agent) == ev.Backup && len(held) == n {
			return []Action{StandbysUp{N: n}}
		}
	}
	return nil
}

func (p *Planner) linkOf(a int) *link {
	if a < 0 || a >= len(p.links) {
		return nil
	}
	return &p.links[a]
}

// rootChild reports whether agent a is a child of the root (of the lost
// one, for a successor) in the launch tree (none: no tree, whose one agent
// asks nobody for adoption).
func (p *Planner) rootChild(a int) bool {
	return p.cfg.Tree != nil && p.cfg.Tree.Parent(a) == topology.Root
}

// live counts the agents whose link has not ended: those that take part
// in a recovery.
func (p *Planner) live() int {
	n := 0
	for _, l := range p.links {
		if !l.closed {
			n++
		}
	}
	return n
}

// standbys lists the agents whose standby link to their backup parent (as
// the tree has it now) is held, and counts those that have one.
func (p *Planner) standbys() (held []int, links int) {
	if p.cfg.Tree == nil {
		return nil, 0
	}
	for a := range p.links {
		if bk := p.cfg.Tree.Backup(a); bk >= 0 {
			links++
			if p.links[a].backup == bk {
				held = append(held, a)
			}
		}
	}
	return held, links
}

// closeLink closes agent a's link if it is of incarnation inc (0: any).
func (p *Planner) closeLink(a int, inc uint64) {
	if l := p.linkOf(a); l != nil && (inc == 0 || max(inc, 1) == max(l.inc, 1)) {
		l.closed = true
	}
}

// AgentLink is how the root's link to one agent stands (Links.Link).
type AgentLink struct {
	Up     bool   // connected and activated
	Closed bool   // its link ended: declared lost, or it left
	Done   bool   // it reported it was done
	Inc    uint64 // the incarnation the link is of (from 1)
	// Fallbacks are the parents beyond its backup it was last told to try
	// (topology.Root: the root).
	Fallbacks []int
	// RootChild: a child of the root; Adopted: a successor root took
	// its link over (or it was started again by this root).
	RootChild, Adopted bool
}

// Live reports whether the link is up and has not ended, and the agent is
// not done.
func (l AgentLink) Live() bool { return l.Up && !l.Closed && !l.Done }

// Links is the planner's view of the root's links, read-only.
type Links struct{ p *Planner }

// Links is a read-only view of the links (links.go).
func (p *Planner) Links() Links { return Links{p} }

// Link is how the root's link to agent a stands.
func (v Links) Link(a int) AgentLink {
	l := v.p.linkOf(a)
	if l == nil {
		return AgentLink{Closed: true}
	}
	return AgentLink{Up: l.up, Closed: l.closed, Done: l.done, Inc: l.inc, Fallbacks: l.fallbacks, RootChild: v.p.rootChild(a), Adopted: l.adopted}
}

// Fallbacks are the parents agent a is told to try beyond its backup
// parent (to which it holds a standby link of its own) when its parent
// and its backup are both lost, in the tree's order (topology's
// Fallbacks): its grandparent while its link is up and open, and the root.
func (v Links) Fallbacks(a int) []int {
	t := v.p.cfg.Tree
	if t == nil || a < 0 || a >= t.N() {
		return nil
	}
	var out []int
	for _, x := range t.Fallbacks(a) {
		if l := v.Link(x); x == topology.Root || x != t.Backup(a) && l.Up && !l.Closed {
			out = append(out, x)
		}
	}
	return out
}

// BackupsOnUp lists the agents told their backup parent (to open a
// standby link to it) when agent a comes up: a itself if its backup is up,
// then, in agent order, the agents up and open whose backup a is.
func (v Links) BackupsOnUp(a int) []int {
	t := v.p.cfg.Tree
	if t == nil || a < 0 || a >= t.N() {
		return nil
	}
	var out []int
	if bk := t.Backup(a); bk >= 0 && v.Link(bk).Up {
		out = append(out, a)
	}
	for b := range v.p.links {
		if l := v.Link(b); t.Backup(b) == a && l.Up && !l.Closed {
			out = append(out, b)
		}
	}
	return out
}

// Told is what an agent is told after a redeal (Links.Redealt): its
// backup parent (Backup), or the fallback parents beyond it.
type Told struct {
	Agent  int
	Backup bool
}

// Redealt is what the agents are told once redeal rd is committed, in
// agent order: each agent with a backup parent whose link is live, and
// that is not on its way to a new parent (rd.Orphaned, dealt its backup
// once its loss is over), is told its backup if rd names it and the
// backup's link is live, else its fallbacks (its grandparent may be
// another).
func (v Links) Redealt(rd Redeal) []Told {
	t := v.p.cfg.Tree
	if t == nil {
		return nil
	}
	var out []Told
	for a := range v.p.links {
		bk := t.Backup(a)
		if bk < 0 || !v.Link(a).Live() || slices.Contains(rd.Orphaned, a) {
			continue
		}
		out = append(out, Told{Agent: a, Backup: slices.Contains(rd.Tell, a) && v.Link(bk).Live()})
	}
	return out
}

// AllGone reports whether every agent's link ended and none is being
// started again (one that is, the job's only agent say, is not gone unless
// the job ends first): the root's loop ends then.
func (v Links) AllGone() bool {
	for a, l := range v.p.links {
		if !l.closed || v.p.Relaunching(a) && !v.p.Ending() {
			return false
		}
	}
	return true
}

// UpNow counts the agents up now (their link open).
func (v Links) UpNow() int {
	n := 0
	for _, l := range v.p.links {
		if l.up && !l.closed {
			n++
		}
	}
	return n
}

// Standbys counts the standby links the tree asks for (one per agent with
// a backup parent) and lists the agents that do not hold theirs.
func (v Links) Standbys() (links int, missing []int) {
	held, links := v.p.standbys()
	for a := range v.p.links {
		if v.p.cfg.Tree != nil && v.p.cfg.Tree.Backup(a) >= 0 && !containsInt(held, a) {
			missing = append(missing, a)
		}
	}
	return links, missing
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
