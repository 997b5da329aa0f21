package recovery

import (
	"maps"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// Losing an agent with agents below it, in a launch tree (docs/recovery.md,
// "Losing an agent"; the agents' side is launch/agent/reparent.go).
//
// The root's detectors confirm that an agent's link is gone (its link
// ended, its parent reported it, its heartbeat timed out, gossip's word
// was confirmed) and tell the planner (LinkLost); how every agent's link
// stands is the planner's (links.go). The planner decides, in order:
//
//   - which of the lost agent's children are orphans on their way to a
//     new parent rather than lost with it: under a restart policy, each
//     child that is up whose backup parent can take it (up, outside the
//     lost subtree, not an orphan itself), or one of the fallback parents
//     it was told (its grandparent, the root);
//   - which agents are lost now: the lost agent's subtree but for the
//     orphans and the agents below them (LoseSubtree), each fenced from
//     outside (Fence);
//   - how long to wait for the orphans (AwaitOrphans): OrphanWait, and
//     FallbackWait more when an orphan's backup is lost too; each live
//     backup is told to switch its orphan at once (a silent parent's
//     link times out later than the root's detection);
//   - each arrival (Reparented, from a backup's report or the root's own
//     adoption) is a tree change (Moved); an orphan that did not arrive
//     in time (OrphansDue) is lost with the agent (OrphanLate);
//   - once every orphan arrived or was given up: the lost agents start
//     again as children of the root, backup parents are dealt again
//     (Redeal), and the loss is told (Lost) and taken as an AgentLost of
//     each lost agent, which decides what happens to its ranks
//     (relaunch.go).
//
// The tree (Config.Tree) is the root's launch tree; the planner changes it
// (Reparent, RecomputeBackups) only in Step, and the root reads it.

// FallbackWait is how much longer than Config.OrphanWait the planner
// waits for an orphan whose backup parent is lost too: it tries its
// fallback parents, each connection bounded by two seconds
// (launch/agent/reparent.go).
const FallbackWait = 4 * time.Second

// nodeLoss is the loss of an agent whose children are moving to new
// parents: AgentLost is decided once they arrived or were given up.
type nodeLoss struct {
	id      int
	agent   int
	err     string
	silent  bool
	lost    []int        // agent and the agents lost with it
	orphans map[int]bool // its children on their way to new parents
	at      time.Time
}

// linkLost takes the end of an agent's link.
func (p *Planner) linkLost(ev LinkLost) []Action {
	if l := p.linkOf(ev.Agent); l == nil || l.closed {
		return nil
	}
	p.noteDeclared(ev, max(p.links[ev.Agent].inc, 1))
	orphans := p.orphansOf(ev.Agent)
	acts := p.loseSubtree(ev.Agent, orphans)
	p.countStarting()
	l := &nodeLoss{agent: ev.Agent, err: ev.Err, silent: ev.Silent, orphans: orphans, at: ev.At}
	l.lost = lostIn(acts)
	if len(orphans) == 0 {
		return append(acts, p.finishLoss(l)...)
	}
	p.lossSeq++
	l.id = p.lossSeq
	p.losses = append(p.losses, l)
	aw := AwaitOrphans{Loss: l.id, Agent: ev.Agent, Wait: p.cfg.OrphanWait}
	t := p.cfg.Tree
	for _, c := range slices.Sorted(maps.Keys(orphans)) {
		bi := t.Backup(c)
		m := OrphanMove{Orphan: c, Backup: bi}
		if !p.canParent(bi, ev.Agent) {
			m.Fallback = true
			aw.Wait = p.cfg.OrphanWait + FallbackWait
		}
		// Even a backup that will refuse the orphan passes the word on.
		m.Switch = bi >= 0 && !t.InSubtree(bi, ev.Agent) && p.links[bi].up && !p.links[bi].closed
		aw.Moves = append(aw.Moves, m)
	}
	return append(acts, aw)
}

// lostIn lists the agents the LoseSubtree actions of acts lose.
func lostIn(acts []Action) []int {
	var lost []int
	for _, act := range acts {
		if ls, ok := act.(LoseSubtree); ok {
			lost = append(lost, ls.Lost...)
		}
	}
	return lost
}

// recovers reports whether the job moves agents to new parents: a launch
// tree, a restart policy, and a job that is not ending.
func (p *Planner) recovers() bool {
	return p.cfg.Tree != nil && p.cfg.Policy != None && !p.Ending()
}

// orphansOf lists lost agent a's children that can move to a new parent:
// up, with a backup or a fallback parent that can take them.
func (p *Planner) orphansOf(a int) map[int]bool {
	if !p.recovers() || p.links[a].done {
		return nil
	}
	var out map[int]bool
	for _, c := range p.cfg.Tree.Children(a) {
		if c >= len(p.links) || !p.links[c].live() {
			continue
		}
		if !p.canParent(p.cfg.Tree.Backup(c), a) && !slices.ContainsFunc(p.links[c].fallbacks, func(x int) bool {
			return x == topology.Root || p.canParent(x, a)
		}) {
			continue
		}
		if out == nil {
			out = map[int]bool{}
		}
		out[c] = true
	}
	return out
}

// canParent reports whether agent b can take an orphan of lost agent a:
// it is up, outside a's subtree, and not an orphan itself.
func (p *Planner) canParent(b, a int) bool {
	if b < 0 || b >= len(p.links) || p.cfg.Tree.InSubtree(b, a) || p.orphaned(b) {
		return false
	}
	return p.links[b].live()
}

// orphaned reports whether agent x is an orphan of a loss under way, or
// below one.
func (p *Planner) orphaned(x int) bool {
	return slices.ContainsFunc(p.losses, func(l *nodeLoss) bool { return p.kept(x, l.orphans) })
}

// kept reports whether agent x is one of keep or below one.
func (p *Planner) kept(x int, keep map[int]bool) bool {
	if p.cfg.Tree == nil {
		return keep[x]
	}
	for k := range keep {
		if p.cfg.Tree.InSubtree(x, k) {
			return true
		}
	}
	return false
}

// lossPending reports whether agent b was lost in a loss whose AgentLost
// is not decided yet (its orphans are on their way): its ranks' end is
// not final.
func (p *Planner) lossPending(b int) bool {
	return slices.ContainsFunc(p.losses, func(l *nodeLoss) bool { return slices.Contains(l.lost, b) })
}

// loseSubtree closes agent a and the agents below it but for those in
// keep and below them: those that had not said they were done are lost,
// and fenced (but for those never started: never, with why).
func (p *Planner) loseSubtree(a int, keep map[int]bool) []Action {
	return p.closeSubtree(a, keep, "")
}

// closeSubtree is loseSubtree; never, if set, is why the agents were never
// started (a launch that failed): they are not fenced. A job without a
// tree has nothing to fence from outside: its one agent runs on the root's
// machine, where LoseSubtree kills it with its ranks, which confirms its
// fence at once.
func (p *Planner) closeSubtree(a int, keep map[int]bool, never string) []Action {
	var ls LoseSubtree
	var fences []Fence
	below := []int(nil)
	if p.cfg.Tree != nil {
		below = p.cfg.Tree.Subtree(a)
	}
	for _, x := range append([]int{a}, below...) {
		if x >= len(p.links) || p.kept(x, keep) || p.links[x].closed {
			continue
		}
		p.links[x].closed = true
		ls.Closed = append(ls.Closed, x)
		if !p.links[x].done {
			ls.Lost = append(ls.Lost, x)
			if never == "" {
				fences = append(fences, Fence{Agent: x, Node: p.agents[x].node, Incarnation: max(p.links[x].inc, 1)})
			}
		}
	}
	if len(ls.Closed) == 0 {
		return nil
	}
	ls.NeverStarted, ls.Ending = never, p.Ending()
	ls.Abandoned = p.abandon(ls)
	acts := []Action{ls}
	for _, f := range fences {
		if p.cfg.Tree != nil {
			acts = append(acts, f)
		} else {
			acts = append(acts, p.fenceDone(FenceDone{Agent: f.Agent, Node: f.Node, Incarnation: f.Incarnation, How: FenceKilled})...)
		}
	}
	return acts
}

// orphansDue gives up on the orphans of a loss that did not arrive: they
// are lost with its agent.
func (p *Planner) orphansDue(ev OrphansDue) []Action {
	i := slices.IndexFunc(p.losses, func(l *nodeLoss) bool { return l.id == ev.Loss })
	if i < 0 {
		return nil
	}
	l := p.losses[i]
	var acts []Action
	for _, c := range slices.Sorted(maps.Keys(l.orphans)) {
		acts = append(acts, OrphanLate{Orphan: c, Agent: l.agent})
		lose := p.loseSubtree(c, nil)
		l.lost = append(l.lost, lostIn(lose)...)
		acts = append(acts, lose...)
	}
	p.countStarting()
	clear(l.orphans)
	return append(acts, p.finishLoss(l)...)
}

// finishLoss ends a loss: the lost agents become children of the root
// (the root starts them again), the others keep the parents they have
// now, backups are dealt again, and the loss is taken (Lost).
func (p *Planner) finishLoss(l *nodeLoss) []Action {
	p.losses = slices.DeleteFunc(p.losses, func(x *nodeLoss) bool { return x == l })
	var acts []Action
	if p.recovers() {
		t := p.cfg.Tree
		rd := Redeal{Lost: slices.Clone(l.lost)}
		for _, b := range l.lost {
			if t.Parent(b) != topology.Root && t.Reparent(b, topology.Root) == nil {
				rd.Rerooted = append(rd.Rerooted, b)
			}
		}
		before := make([]int, t.N())
		for i := range before {
			before[i] = t.Backup(i)
			if p.orphaned(i) {
				rd.Orphaned = append(rd.Orphaned, i)
			}
		}
		t.RecomputeBackups()
		for i, bk := range before {
			// Its backup is new, or not the one it holds a link to.
			if nb := t.Backup(i); nb >= 0 && (nb != bk || p.links[i].backup != nb) {
				rd.Tell = append(rd.Tell, i)
			}
		}
		acts = append(acts, rd)
	}
	acts = append(acts, Lost{Agent: l.agent, Agents: slices.Clone(l.lost), Err: l.err, Silent: l.silent, Running: p.phase == Running})
	// Each lost agent's loss, l.agent's first, the others lost with it
	// (above them in the tree): the incarnation of the root's link to it
	// (as fenced), on the node it ran on.
	evs := make([]AgentLost, len(l.lost))
	for i, x := range l.lost {
		evs[i] = AgentLost{Agent: x, Incarnation: max(p.links[x].inc, 1), Node: p.agents[x].node, Err: l.err, Silent: l.silent}
		if x != l.agent {
			evs[i].Err, evs[i].With, evs[i].Silent = "", p.agents[l.agent].node, false
		}
	}
	for _, ev := range evs {
		acts = append(acts, p.Step(ev)...)
	}
	return acts
}

// reparented takes an agent's new parent: a backup's report that it took
// an orphan, or the root's adoption of one.
func (p *Planner) reparented(ev Reparented) []Action {
	t := p.cfg.Tree
	if t == nil || ev.Agent < 0 || ev.Agent >= len(p.links) {
		return nil
	}
	c := p.links[ev.Agent]
	if c.closed || ev.Incarnation != max(c.inc, 1) {
		// Declared lost already (its old parent's report came first): the
		// fence of its node ends it.
		return []Action{MoveIgnored{Agent: ev.Agent, Parent: ev.Parent, Incarnation: ev.Incarnation}}
	}
	mv := Moved{Agent: ev.Agent, From: t.Parent(ev.Agent), To: ev.Parent, Fallback: ev.Parent != topology.Root && t.Backup(ev.Agent) != ev.Parent}
	if mv.From != ev.Parent {
		if err := t.Reparent(ev.Agent, ev.Parent); err != nil {
			return []Action{MoveFailed{Agent: ev.Agent, Parent: ev.Parent, Err: err.Error(), Undo: ev.Parent == topology.Root && c.adopted}}
		}
	}
	acts := []Action{mv}
	for _, l := range p.losses {
		if l.orphans[ev.Agent] {
			delete(l.orphans, ev.Agent)
			if len(l.orphans) == 0 {
				acts = append(acts, OrphansArrived{Agent: l.agent, Since: l.at})
				acts = append(acts, p.finishLoss(l)...)
			}
			break
		}
	}
	return acts
}

// LinkLost: the root's detectors confirmed that the link of agent Agent is
// gone (its link ended, its parent said so, its heartbeat timed out,
// gossip's word was confirmed by the link's silence).
type LinkLost struct {
	Agent  int
	Err    string
	Silent bool      // a heartbeat's timeout: its node may be gone
	At     time.Time // when (the root's clock: the orphans' wait is measured from it)
	// Direct: the link that ended is the root's own (a child of the
	// root's), quiet for Quiet when it ended. The planner takes from them
	// how long the node had been silent (silenceAt).
	Direct bool
	Quiet  time.Duration
}

// OrphansDue: the wait for the orphans of loss Loss (AwaitOrphans)
// passed.
type OrphansDue struct{ Loss int }

// Reparented: agent Agent (incarnation Incarnation) has a new parent,
// Parent (topology.Root: the root): a backup or fallback parent took it,
// or the root adopted it.
type Reparented struct {
	Agent       int
	Parent      int
	Incarnation uint64
}

func (LinkLost) isEvent()   {}
func (OrphansDue) isEvent() {}
func (Reparented) isEvent() {}

// LoseSubtree: the links of Closed are gone; Lost (those of them that had
// not said they were done) are lost: their ranks ended with them, and the
// root kills what it can of them (a Fence follows for each). NeverStarted,
// if set, is why they never started (LaunchFailed): their ranks never ran,
// and there is nothing to fence. Abandoned are their ranks that had not
// ended (of Closed, for NeverStarted), which the planner counts as ended
// now (the ledger: revived if their agent starts again), and the root
// records as ended with their agent; Ending: the job was ending then, so
// their end is not its failure.
type LoseSubtree struct {
	Closed       []int
	Lost         []int
	NeverStarted string
	Abandoned    []int
	Ending       bool
}

// OrphanMove is one orphan's way to a new parent.
type OrphanMove struct {
	Orphan int
	Backup int // its backup parent (topology.None: none)
	// Fallback: its backup cannot take it: it tries its fallback parents.
	Fallback bool
	// Switch: tell Backup to take Orphan at once.
	Switch bool
}

// AwaitOrphans: the loss of Agent waits for its orphans to reach new
// parents, at most Wait; then the root steps OrphansDue{Loss}.
type AwaitOrphans struct {
	Loss  int
	Agent int
	Moves []OrphanMove
	Wait  time.Duration
}

// OrphanLate: Orphan did not reach a new parent in time after the loss of
// Agent: it is lost with it.
type OrphanLate struct{ Orphan, Agent int }

// OrphansArrived: every orphan of the loss of Agent, which began at Since,
// has its new parent.
type OrphansArrived struct {
	Agent int
	Since time.Time
}

// Redeal: the tree changed after a loss: Rerooted are children of the
// root now, backups were dealt again, and the root tells Tell (whose
// backup is new, or not the one they hold a standby link to) their backup
// once the change is committed, and the others their fallbacks; Orphaned
// are on their way to a new parent and cannot be told yet. Lost names the
// lost agents, for the state log's note.
type Redeal struct {
	Lost     []int
	Rerooted []int
	Tell     []int
	Orphaned []int
}

// Lost: Agents were lost, Agent first (the others with it); the planner's
// decisions on each (AgentLost) follow. Running: the job was running when
// they were lost (a recovery's time counts from now).
type Lost struct {
	Agent   int
	Agents  []int
	Err     string
	Silent  bool
	Running bool
}

// Moved: agent Agent moved from From to To (topology.Root: the root);
// Fallback: To is not its backup parent (its backup was lost too).
type Moved struct {
	Agent, From, To int
	Fallback        bool
}

// MoveIgnored: a new parent was reported for an incarnation declared lost.
type MoveIgnored struct {
	Agent, Parent int
	Incarnation   uint64
}

// MoveFailed: the tree cannot take the move. Undo: the root's adoption
// of the agent (Parent the root) is undone: the root closes its link.
type MoveFailed struct {
	Agent, Parent int
	Err           string
	Undo          bool
}

// Reason is how the ranks of Abandoned ended, as the root records it.
func (ls LoseSubtree) Reason() string {
	if ls.NeverStarted != "" {
		return "never started: " + ls.NeverStarted
	}
	return "lost with its agent"
}

func (LoseSubtree) isAction()    {}
func (AwaitOrphans) isAction()   {}
func (OrphanLate) isAction()     {}
func (OrphansArrived) isAction() {}
func (Redeal) isAction()         {}
func (Lost) isAction()           {}
func (Moved) isAction()          {}
func (MoveIgnored) isAction()    {}
func (MoveFailed) isAction()     {}

// AdoptAsked: agent Agent (incarnation Incarnation) asks the root to adopt
// it. Either it is a child of the root (RootChild) asking a successor root
// to take it over from the lost one, or it is below a child of the root
// and its parent and its backup parent are both lost: the root is the last
// of its fallback parents. Known: the agent is one of the job's, by the
// name its credentials give; Linked: the root holds a link to it already
// (a successor started it); Name: the node its credentials name.
type AdoptAsked struct {
	Agent       int
	Incarnation uint64
	Known       bool
	Linked      bool
	Name        string
}

func (AdoptAsked) isEvent() {}

// Adopt: take agent Agent as a child of the root on the link it asked on.
// Orphan: it moves below the root (the root steps Reparented once it is
// the root's); else it is a child of the lost root that a successor takes
// over.
type Adopt struct {
	Agent       int
	Incarnation uint64
	Orphan      bool
}

// RefuseAdoption: refuse agent Agent's request for adoption, for Why;
// Fenced: the incarnation asking was declared lost, and is told so (it
// kills its ranks). Held, for a refusal whose reason has no words
// (RefuseUnknown, RefuseTaken), is how the root holds the agent of that
// index, said once per incarnation refused (nil: said already, or none).
type RefuseAdoption struct {
	Agent       int
	Incarnation uint64
	Why         RefuseReason
	Fenced      bool
	Held        *AdoptionHeld
}

// AdoptionHeld is a refused adoption's view of the agent that asked: Name,
// the node its credentials name; the root's agent of its index: its
// Incarnation, and whether it is a child of the root, adopted, lost.
type AdoptionHeld struct {
	Name                     string
	Incarnation              uint64
	RootChild, Adopted, Lost bool
}

func (Adopt) isAction()          {}
func (RefuseAdoption) isAction() {}

// RefuseReason is why a request for adoption is refused.
type RefuseReason int

const (
	// RefuseNoRecovery: the job does not move agents (no launch tree, or
	// no restart policy).
	RefuseNoRecovery RefuseReason = iota + 1
	// RefuseDeclaredLost: the incarnation asking was declared lost.
	RefuseDeclaredLost
	// RefuseNotUp: the agent is not up.
	RefuseNotUp
	// RefuseEnding: the job is ending.
	RefuseEnding
	// RefuseUnknown: no agent of the job by that index and name.
	RefuseUnknown
	// RefuseTaken: a child of the root a successor adopted already, or
	// holds a link to, or an incarnation of it declared lost or being
	// replaced: one adoption per agent incarnation.
	RefuseTaken
)

// adoptAsked decides whether the root adopts an agent that asks it: a
// child of the lost root, or an orphan whose last fallback parent it is.
func (p *Planner) adoptAsked(ev AdoptAsked) []Action {
	var l link
	if ev.Known && p.linkOf(ev.Agent) != nil {
		l = p.links[ev.Agent]
	}
	inc := max(ev.Incarnation, 1)
	refuse := func(why RefuseReason) []Action {
		lost := ev.Known && (inc < max(l.inc, 1) || inc == max(l.inc, 1) && (p.Relaunching(ev.Agent) || l.closed && !l.done))
		r := RefuseAdoption{Agent: ev.Agent, Incarnation: ev.Incarnation, Why: why, Fenced: lost}
		if held := p.linkOf(ev.Agent); why.Words() == "" && held != nil && p.refusedSaid[ev.Agent] != ev.Incarnation {
			if p.refusedSaid == nil {
				p.refusedSaid = map[int]uint64{}
			}
			p.refusedSaid[ev.Agent] = ev.Incarnation
			r.Held = &AdoptionHeld{Name: ev.Name, Incarnation: p.AgentIncarnation(ev.Agent), RootChild: p.rootChild(ev.Agent),
				Adopted: held.adopted, Lost: held.closed || p.Relaunching(ev.Agent)}
		}
		return []Action{r}
	}
	switch {
	case !ev.Known:
		return refuse(RefuseUnknown)
	case p.rootChild(ev.Agent):
		if l.closed || l.adopted || ev.Linked || inc != max(l.inc, 1) || p.Relaunching(ev.Agent) {
			return refuse(RefuseTaken)
		}
		return []Action{Adopt{Agent: ev.Agent, Incarnation: ev.Incarnation}}
	}
	why := RefuseReason(0)
	switch {
	case p.cfg.Tree == nil || p.cfg.Policy == None:
		why = RefuseNoRecovery
	case l.closed || max(ev.Incarnation, 1) != max(l.inc, 1):
		why = RefuseDeclaredLost
	case !l.up:
		why = RefuseNotUp
	case p.Ending():
		why = RefuseEnding
	default:
		return []Action{Adopt{Agent: ev.Agent, Incarnation: ev.Incarnation, Orphan: true}}
	}
	return refuse(why)
}
