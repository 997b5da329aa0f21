package recovery

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ftlaunch/ftlaunch/topology"
)

// Losing an agent, under a restart policy.
//
// A lost agent whose node still answers (its link ended, its process
// exited) is started again on the same node as its next incarnation, and
// its ranks go through the restart protocol on the new agent:
//
//	Rank: commit Suspend (epoch+1; the agent's ranks failed, the agent lost)
//	      →  Suspend to every live agent; each acknowledges
//	      commit Relaunch  →  Relaunch the agent as incarnation+1; it comes
//	                          up with the job's share, the epoch and the
//	                          node table, and starts no rank by itself
//	      commit Respawn   →  its ranks, as their next incarnation, then
//	      Patch and Resume as for a failed rank
//	Job:  commit Relaunch (epoch+1, restarts+1)  →  Relaunch, then
//	      commit RestartJob  →  every agent, the new one too, starts every
//	                            rank again
//
// A relaunch counts against --max-restarts twice over: the agent's own
// restarts (a node whose agent keeps dying ends the job) and, under Rank,
// each of its ranks' (under Job, the job's). A node that went silent (its
// link's heartbeat timed out) is not tried again: its agent starts on the
// next spare node (Config.Spares), which then serves the lost node's ranks;
// with no spare left, as a second agent on a surviving host, named
// host+node (GuestNode), on the first surviving node whose free slots hold
// its ranks (Config.Slots), or with Config.Oversubscribe on the surviving
// host with the fewest ranks; with none of these, the job ends, naming
// why (placeSilent). The root starts every lost agent again
// as a child of the root, once the agents below it moved to their backup
// parents (or were lost with it: launch/root/reparent.go); an agent that
// hosted a root replica starts without one (the group goes on with one
// voter less).
//
// The Relaunch stage ends once every lost agent runs again and every lost
// incarnation's fence is confirmed (FenceDone, relaunchDone): no rank of a
// new incarnation starts while an older one may still run on a node that
// answers (a stopped agent does not stop its ranks).
//
// Nothing here waits for a node table: under Job a loss during the launch
// restarts the job like any other; under Rank a program that never opened
// the rank protocol has its ranks started again alone (alone.go), and only
// a client library program that opened it but has no table yet cannot be
// recovered. A relaunch that fails ends the job, naming why.

// agentSt is where one agent stands.
type agentSt int

const (
	aUp          agentSt = iota // running (or never lost)
	aLost                       // lost: to be started again as inc+1
	aRelaunching                // its Relaunch was decided: inc is the new incarnation, awaited
)

type agentState struct {
	node     string
	inc      uint64 // current incarnation, from 1
	st       agentSt
	sent     bool // the Relaunch of inc was sent under this planner
	restarts int
	// fences are its lost incarnations whose fence is not confirmed
	// (FenceDone) yet; fenced, by node, the highest incarnation whose
	// fence is (heard before the loss, too).
	fences []FenceRecord
	fenced map[string]uint64
	// confirmed are its fences confirmed, by node, with how (the first
	// confirmation of each: a fence that ends later changes nothing).
	confirmed []FenceRecord
	// declared is when its incarnation was declared lost (fence.go);
	// watched, the incarnation gossip said was dead while its link spoke
	// (KeptAlive: its link's silence alone condemns it, detect.go).
	declared declaration
	watched  uint64
}

// AgentRecord is one agent's part of a committed record: an agent lost
// and being started again, or one started again before (Up), so that a new
// leader knows every agent's incarnation from the last record alone.
type AgentRecord struct {
	Agent       int
	Node        string
	Incarnation uint64
	Restarts    int
	Lost        bool // not relaunched yet: Incarnation is the one that was lost
	Up          bool // relaunched and up
	// Unfenced are its lost incarnations whose fence was not confirmed:
	// a new leader fences them again before any rank starts again.
	Unfenced []FenceRecord `json:",omitempty"`
	// Fenced are its lost incarnations whose fence was confirmed, with
	// how (FenceDone.How): the state log says whether a replacement
	// waited for a fence that reached the node or for the node's
	// self-fence bound.
	Fenced []FenceRecord `json:",omitempty"`
}

// FenceRecord names a lost agent incarnation to fence: what it started on
// Node is killed (launch/fence), incarnations up to Incarnation. How says
// how its fence was confirmed ("": not yet).
type FenceRecord struct {
	Node        string
	Incarnation uint64
	How         FenceHow `json:",omitempty"`
}

// AgentIncarnation is agent a's current incarnation (1: the first).
func (p *Planner) AgentIncarnation(a int) uint64 { return p.agents[a].inc }

// AgentNode is the node agent a was last started on, or is to be: its
// own (Config.Nodes; "" if unknown), a spare, or a surviving host's
// (GuestNode).
func (p *Planner) AgentNode(a int) string { return p.agents[a].node }

// Relaunching reports whether agent a is lost and being started again:
// its ranks are not the job's end.
func (p *Planner) Relaunching(a int) bool {
	return a >= 0 && a < len(p.agents) && p.agents[a].st != aUp
}

// RestartsJob reports whether a restart of the whole job is decided and
// not carried out yet: every rank's end until then is the old
// incarnation's.
func (p *Planner) RestartsJob() bool {
	return p.rc != nil && (p.rc.stage == StageRestartJob || p.cfg.Policy == Job && p.rc.stage == StageRelaunch)
}

// agentLost takes the loss of an agent.
func (p *Planner) agentLost(ev AgentLost) []Action {
	if p.phase == Over {
		return nil // the job had already ended
	}
	lost := Reason{Kind: ReasonAgentLost, Rank: NoRank, Node: ev.Node, Text: ev.Err, With: ev.With, Max: p.cfg.MaxRestarts}
	end := func(kind ReasonKind) []Action {
		why := lost
		why.Kind = kind
		return p.endFor(ev.Node, NoRank, ExitLauncher, why)
	}
	if p.cfg.Policy == None || p.phase == Ending || ev.Agent < 0 || ev.Agent >= len(p.agents) {
		return end(ReasonAgentLost)
	}
	as := &p.agents[ev.Agent]
	if ev.Incarnation != 0 && ev.Incarnation < as.inc {
		return nil // an older incarnation's loss: evidence that is stale
	}
	if ev.Incarnation > as.inc {
		// An incarnation a lost leader started and this planner has not
		// heard of: it was lost too.
		as.inc = ev.Incarnation
	} else if as.st == aLost {
		return nil // reported again (two sources)
	}
	// aRelaunching: the new incarnation was lost before it came up, a
	// second loss.
	alone := false
	if p.cfg.Policy == Rank {
		var noTable bool
		if alone, noTable = p.replaceAlone(); noTable {
			return end(ReasonAgentNoTable)
		}
	}
	// Where the new incarnation runs: the node, or for a silent one
	// elsewhere.
	node := ev.Node
	if ev.Silent {
		lost.Place = p.placeSilent(ev.Agent, ev.Node)
		if k := lost.Place.Kind; k == PlaceNoHost || k == PlaceNoSlots {
			return end(ReasonAgentNoPlace)
		}
		node = lost.Place.Node
	}
	if as.restarts >= p.cfg.MaxRestarts {
		lost.Restarts = as.restarts
		return end(ReasonAgentLimit)
	}
	var ranks []int
	for r := range p.ranks {
		if p.ranks[r].agent == ev.Agent && p.ranks[r].st != rEnded {
			ranks = append(ranks, r)
		}
	}
	relaunch := func() Reason {
		why := lost
		why.Kind, why.Incarnation, why.Restarts = ReasonAgentRelaunch, as.inc+1, as.restarts
		return why
	}
	if p.cfg.Policy == Job {
		// A restart decided and not sent yet (its agents being started
		// again, or its fences awaited) takes this loss in: the ranks of
		// the incarnation it starts never ran.
		pending := p.rc != nil && (p.rc.stage == StageRelaunch || p.rc.stage == StageRestartJob && !p.rc.committed)
		if !pending {
			if p.restarts >= p.cfg.MaxRestarts {
				lost.Restarts = p.restarts
				return end(ReasonAgentJobLimit)
			}
			p.restartJob()
		}
		p.loseAgent(ev.Agent, ev.Node, node)
		why := relaunch()
		why.JobRestarts, why.Decided = p.restarts, pending
		return append([]Action{Record{Why: why, Node: ev.Node, Rank: NoRank}, Report{Why: why}}, p.begin(StageRelaunch)...)
	}
	for _, r := range ranks {
		rs := &p.ranks[r]
		if rs.st == rFailed {
			continue // failed already, and counted: not respawned yet
		}
		if rs.restarts >= p.cfg.MaxRestarts {
			rs.history = append(rs.history, Ended{Incarnation: rs.inc})
			rs.st = rEnded
			why := lost
			why.Kind, why.Rank, why.Restarts, why.History = ReasonAgentRankLimit, r, rs.restarts, slices.Clone(rs.history)
			return p.endFor(ev.Node, r, ExitLauncher, why)
		}
	}
	for _, r := range ranks {
		rs := &p.ranks[r]
		if rs.st != rFailed {
			rs.history = append(rs.history, Ended{Incarnation: rs.inc})
			rs.restarts++
		}
		rs.st, rs.sent, rs.addr = rFailed, false, nil
	}
	p.loseAgent(ev.Agent, ev.Node, node)
	why := relaunch()
	why.Ranks, why.Alone = ranks, alone
	acts := []Action{Record{Why: why, Node: ev.Node, Rank: NoRank}, Report{Why: why}}
	if alone {
		return append(acts, p.beginAlone(StageRelaunch)...)
	}
	return append(acts, p.begin(StageSuspend)...)
}

// loseAgent marks agent a lost, to start again on node: its incarnation
// that ran on lostNode is to be fenced (FenceDone) before any rank starts
// again.
func (p *Planner) loseAgent(a int, lostNode, node string) {
	as := &p.agents[a]
	p.awaitFence(a, lostNode, as.inc)
	as.restarts++
	as.st, as.sent, as.node = aLost, false, node
}

// placeSilent is where the agent of a node that went silent starts
// again: the next spare node; else, as a
// second agent on a surviving host (GuestNode), the first surviving node
// in agent order whose free slots hold all its ranks; else, with
// --oversubscribe, the surviving host with the fewest ranks (ties: agent
// order). A host's free slots are its slots (Config.Slots) less the ranks
// of every agent that runs there now, the lost one excepted. With none of
// these, nowhere (PlaceNoHost, PlaceNoSlots): the job ends.
func (p *Planner) placeSilent(lost int, lostNode string) Place {
	if p.silent == nil {
		p.silent = map[string]bool{}
	}
	p.silent[HostOf(lostNode)] = true
	if n := p.nextSpare(); n != "" {
		return Place{Kind: PlaceSpare, Node: n}
	}
	load := map[string]int{} // ranks per host, the lost agent's excepted
	need := 0
	for r := range p.ranks {
		switch a := p.ranks[r].agent; {
		case a == lost:
			need++
		case a >= 0 && a < len(p.agents) && p.agents[a].node != "":
			load[HostOf(p.agents[a].node)]++
		}
	}
	var hosts []string // surviving hosts, in agent order
	for a, as := range p.agents {
		if h := HostOf(as.node); a != lost && as.st == aUp && h != "" && !p.silent[h] && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	for _, h := range hosts {
		if slots, ok := p.cfg.Slots[h]; ok && slots-load[h] >= need {
			return Place{Kind: PlaceFreeSlots, Node: GuestNode(h, lostNode), Host: h}
		}
	}
	switch {
	case p.cfg.Oversubscribe && len(hosts) == 0:
		return Place{Kind: PlaceNoHost}
	case p.cfg.Oversubscribe:
		h := hosts[0]
		for _, c := range hosts[1:] {
			if load[c] < load[h] {
				h = c
			}
		}
		return Place{Kind: PlaceShared, Node: GuestNode(h, lostNode), Host: h, Load: load[h]}
	}
	return Place{Kind: PlaceNoSlots, Need: need}
}

// HostOf is the host a node's name stands for: the name itself, or for an
// agent started as a second agent on a surviving host (GuestNode) the
// host's part. Every place a name is turned into a place to start or
// fence something goes through it.
func HostOf(node string) string {
	host, _, _ := strings.Cut(node, "+")
	return host
}

// GuestNode names the agent of node started again on host, beside the
// host's own agent: "host+node" ("node001+node003"; '+' is never in a
// host name). Names are identities (TLS peers, fence records, gossip
// members, raft IDs), so it differs from the host's own; a guest moved
// again keeps the lost node's name as its base (hostB+node003).
func GuestNode(host, node string) string {
	if _, base, ok := strings.Cut(node, "+"); ok {
		node = base
	}
	return host + "+" + node
}

// nextSpare is the first spare node no agent runs on ("": none left).
func (p *Planner) nextSpare() string {
	for _, n := range p.cfg.Spares {
		if !slices.ContainsFunc(p.agents, func(as agentState) bool { return as.node == n }) {
			return n
		}
	}
	return ""
}

func ranksList(ranks []int) string {
	if len(ranks) == 0 {
		return "(none)"
	}
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	return strings.Join(s, ", ")
}

// relaunchStep takes a relaunch's outcome.
func (p *Planner) relaunchStep(ev Event) []Action {
	switch ev := ev.(type) {
	case Relaunched:
		if ev.Agent < 0 || ev.Agent >= len(p.agents) {
			return nil
		}
		as := &p.agents[ev.Agent]
		if as.st != aRelaunching || ev.Incarnation != as.inc {
			return nil // an older incarnation, or heard already
		}
		as.st = aUp
		rc := p.rc
		if rc == nil || p.phase != Recovering {
			return nil
		}
		switch {
		case rc.stage == StageSuspend:
			// It started no rank: it has nothing to suspend.
			rc.acks[ev.Agent] = true
			if rc.committed && p.allAcked() {
				return p.afterSuspend()
			}
		case rc.stage == StageRelaunch && rc.committed && p.relaunchDone():
			return p.afterRelaunch()
		}
	case RelaunchFailed:
		if ev.Agent < 0 || ev.Agent >= len(p.agents) {
			return nil
		}
		as := &p.agents[ev.Agent]
		p.closeLink(ev.Agent, ev.Incarnation)
		if as.st != aRelaunching || ev.Incarnation != as.inc {
			return nil
		}
		return p.endFor(as.node, NoRank, ExitLauncher, Reason{Kind: ReasonRelaunchFailed, Rank: NoRank, Node: as.node, Incarnation: as.inc, Text: ev.Msg})
	}
	return nil
}

// afterSuspend is the stage after a suspension: agents lost are started
// again, and their fences confirmed, first.
func (p *Planner) afterSuspend() []Action {
	return p.next(p.beforeRestart(StageRespawn))
}

// relaunchDone reports whether every lost agent runs again and every lost
// incarnation's fence is confirmed: ranks may start again. No rank of a
// new incarnation starts while one of an older incarnation may still run
// on a node that answers (its agent stopped, say: a stopped agent kills
// nothing); the root confirms a fence once it ended what the lost
// incarnation left, or found its node does not answer (launch/root's
// fence.go).
func (p *Planner) relaunchDone() bool {
	return !p.anyAgent(aLost, aRelaunching) && !p.fencePending()
}

// fencePending reports whether a lost incarnation's fence is not
// confirmed yet.
func (p *Planner) fencePending() bool {
	for _, as := range p.agents {
		if len(as.fences) > 0 {
			return true
		}
	}
	return false
}

// awaitFence notes that incarnation inc of agent a, lost on node, is to be
// fenced, unless that was confirmed already.
func (p *Planner) awaitFence(a int, node string, inc uint64) {
	as := &p.agents[a]
	if as.fenced[node] >= inc {
		return
	}
	for i, f := range as.fences {
		if f.Node == node {
			// One fence of a node ends every incarnation up to its own.
			as.fences[i].Incarnation = max(f.Incarnation, inc)
			return
		}
	}
	as.fences = append(as.fences, FenceRecord{Node: node, Incarnation: inc})
}

// fenceDone takes the confirmation of a fence: a stage waiting for it
// goes on.
func (p *Planner) fenceDone(ev FenceDone) []Action {
	if ev.Agent < 0 || ev.Agent >= len(p.agents) {
		return nil
	}
	as := &p.agents[ev.Agent]
	if as.fenced == nil {
		as.fenced = map[string]uint64{}
	}
	if as.fenced[ev.Node] < ev.Incarnation {
		as.confirmed = slices.DeleteFunc(as.confirmed, func(f FenceRecord) bool { return f.Node == ev.Node })
		as.confirmed = append(as.confirmed, FenceRecord{Node: ev.Node, Incarnation: ev.Incarnation, How: cmp.Or(ev.How, FenceKilled)})
	}
	as.fenced[ev.Node] = max(as.fenced[ev.Node], ev.Incarnation)
	as.fences = slices.DeleteFunc(as.fences, func(f FenceRecord) bool { return f.Node == ev.Node && f.Incarnation <= ev.Incarnation })
	rc := p.rc
	if rc == nil || p.phase != Recovering || rc.stage != StageRelaunch || !rc.committed || !p.relaunchDone() {
		return nil
	}
	return p.afterRelaunch()
}

// fencesAgain is a new leader's fences of the lost incarnations whose
// fence its predecessor did not see confirmed.
func (p *Planner) fencesAgain() []Action {
	var acts []Action
	for a, as := range p.agents {
		for _, f := range as.fences {
			acts = append(acts, Fence{Agent: a, Node: f.Node, Incarnation: f.Incarnation, Again: true})
		}
	}
	return acts
}

// afterRelaunch is the stage after every lost agent runs again.
func (p *Planner) afterRelaunch() []Action {
	if p.cfg.Policy == Job {
		return p.next(StageRestartJob)
	}
	return p.next(StageRespawn)
}

// sendRelaunch is what a committed Relaunch stage does.
func (p *Planner) sendRelaunch(arm Arm) []Action {
	var acts []Action
	for a := range p.agents {
		as := &p.agents[a]
		if as.st == aLost {
			as.inc++
			as.st = aRelaunching
		}
		if as.st != aRelaunching || as.sent {
			continue
		}
		as.sent = true
		switch l := &p.links[a]; {
		case l.inc < as.inc:
			// A new link, the root's own (it does not wait for the
			// agent to ask for adoption).
			*l = link{inc: as.inc, adopted: true, backup: topology.None}
			acts = append(acts, Relaunch{Agent: a, Node: as.node, Incarnation: as.inc, Epoch: p.epoch})
		case l.inc == as.inc && l.up && !l.closed:
			// The stage committed again by a new leader: the incarnation
			// was started already, and is up.
			as.st = aUp
		}
		// Else it was started already and is not up: its link's coming
		// up or its loss says what became of it.
	}
	if p.relaunchDone() {
		// Every agent came up already (sent again after a leader change),
		// and every fence was confirmed.
		return p.afterRelaunch()
	}
	return append(acts, arm)
}

func (p *Planner) anyAgent(sts ...agentSt) bool {
	for _, as := range p.agents {
		for _, st := range sts {
			if as.st == st {
				return true
			}
		}
	}
	return false
}

// agentRecords is the committed form of the agents being started again.
func (p *Planner) agentRecords() []AgentRecord {
	var out []AgentRecord
	for a, as := range p.agents {
		if as.st != aUp || as.inc > 1 || len(as.fences) > 0 {
			out = append(out, AgentRecord{Agent: a, Node: as.node, Incarnation: as.inc, Restarts: as.restarts, Lost: as.st == aLost, Up: as.st == aUp,
				Unfenced: slices.Clone(as.fences), Fenced: slices.Clone(as.confirmed)})
		}
	}
	return out
}

// restoreAgents takes the agents of a committed record.
func (p *Planner) restoreAgents(recs []AgentRecord) {
	for _, ar := range recs {
		if ar.Agent < 0 || ar.Agent >= len(p.agents) {
			continue
		}
		as := &p.agents[ar.Agent]
		as.node, as.inc, as.restarts, as.sent = ar.Node, ar.Incarnation, ar.Restarts, false
		p.links[ar.Agent].inc = ar.Incarnation // the root's handle is of it (AgentIncarnation)
		as.fences = slices.Clone(ar.Unfenced)
		as.confirmed = slices.Clone(ar.Fenced)
		for _, f := range ar.Fenced {
			if as.fenced == nil {
				as.fenced = map[string]uint64{}
			}
			as.fenced[f.Node] = max(as.fenced[f.Node], f.Incarnation)
		}
		switch {
		case ar.Up:
			as.st = aUp
		case ar.Lost:
			as.st = aLost
		default:
			as.st = aRelaunching
		}
	}
}

// Relaunched: a relaunched agent is up and has its share of the job.
type Relaunched struct {
	Agent       int
	Incarnation uint64
}

// RelaunchFailed: a relaunched agent could not be started, or did not
// connect back.
type RelaunchFailed struct {
	Agent       int
	Incarnation uint64
	Msg         string
}

// FenceDone: the fence of agent Agent's incarnations up to Incarnation on
// Node is confirmed: what they left there was killed, or the node does not
// answer and its agent killed its ranks itself (How; launch/root's
// fence.go says when the root confirms one, SelfFenceAt).
type FenceDone struct {
	Agent       int
	Node        string
	Incarnation uint64
	How         FenceHow // "": FenceKilled
}

func (Relaunched) isEvent()     {}
func (RelaunchFailed) isEvent() {}
func (FenceDone) isEvent()      {}

// Relaunch tells the root to start agent Agent again on its node as
// Incarnation: fresh credentials, the job's share of the node, the
// recovery's epoch and the node table; it starts no rank by itself. (A
// stage committed again by a new leader starts no incarnation started
// already: sendRelaunch.)
type Relaunch struct {
	Agent       int
	Node        string
	Incarnation uint64
	Epoch       uint64
}

// Fence tells the root to fence agent Agent's incarnations up to
// Incarnation on Node, and to confirm it (FenceDone): every agent lost
// (LoseSubtree), and (Again) a new leader's fences of the incarnations
// its predecessor did not see confirmed.
type Fence struct {
	Agent       int
	Node        string
	Incarnation uint64
	Again       bool
}

func (Relaunch) isAction() {}
func (Fence) isAction()    {}
