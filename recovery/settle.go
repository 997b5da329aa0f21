package recovery

import (
	"cmp"
	"slices"
)

// What the root used to decide by itself around the restart protocol,
// decided here (docs/design.md, "The planner"):
//
//   - a recovery is over, for the user and the state log, once every agent
//     whose link has not ended acknowledged its last phase (Resume, or a
//     RestartJob): RecoveryOver, with the record a successor needs;
//   - a restart of the job decided while the launch's agents are still
//     coming up waits for all of them (AwaitLaunch), so that none starts
//     its ranks as an older incarnation after it; the last one up sends it
//     (LaunchUp → RestartJob{Deferred});
//   - a node whose ranks have all ended and which never gave its part to a
//     collective the other nodes wait in ends the job: the wait would last
//     forever (Waiting → Stranded);
//   - a successor leads the agents once every child of the lost root was
//     adopted or given up (an agent lost and being started again is not
//     waited for): the recovery its predecessor left is carried on then
//     (Adopting → Leads, what LeaderChanged does, RefillGroup).

// ackTally counts the acknowledgements of a recovery's last phase.
type ackTally struct {
	epoch uint64
	acks  map[int]bool
}

// tallyLast starts counting the acknowledgements of the last phase of the
// recovery of this epoch.
func (p *Planner) tallyLast() { p.tally = &ackTally{epoch: p.epoch, acks: map[int]bool{}} }

// lastAck counts agent a's acknowledgement (of stage, for epoch) of a
// recovery's last phase; once every agent whose link has not ended
// acknowledged it, the recovery is over.
func (p *Planner) lastAck(a int, epoch uint64, stage Stage) []Action {
	t := p.tally
	if t == nil || epoch != p.epoch || t.epoch != epoch {
		return nil
	}
	t.acks[a] = true
	if len(t.acks) < p.live() {
		return nil
	}
	p.tally = nil
	return []Action{RecoveryOver{Epoch: epoch, Stage: stage, Record: p.Settled()}}
}

// RecoveryOver: every agent whose link has not ended acknowledged the last
// phase (Stage: StageResume, or StageRestartJob) of the recovery of
// Epoch: it is over. Record is what the state log keeps of it (Settled):
// the agents started again, on which node, as which incarnation, without
// which a successor would refuse their adoption.
type RecoveryOver struct {
	Epoch  uint64
	Stage  Stage
	Record Checkpoint
}

func (RecoveryOver) isAction() {}

// countStarting counts the agents of the launch not up yet (a first
// incarnation being started; one lost and started again is waited for by
// the recovery itself, and is up by the time a restart is sent).
func (p *Planner) countStarting() {
	if !p.cfg.Launching || p.cfg.Resumed {
		return
	}
	p.starting = 0
	for _, l := range p.links {
		if !l.up && !l.closed {
			p.starting++
		}
	}
}

// launchUp takes an agent of the launch up: once every one is, a restart
// of the job held for them goes out.
func (p *Planner) launchUp() []Action {
	if !p.cfg.Launching || p.cfg.Resumed {
		return nil
	}
	p.countStarting()
	if p.held == 0 || p.starting > 0 {
		return nil
	}
	held := p.held
	p.held = 0
	if p.rc == nil || p.rc.stage != StageRestartJob || p.epoch != held {
		return nil // the job is ending, or another loss took the restart over
	}
	return []Action{RestartJob{Epoch: p.epoch, Restarts: p.restarts, Deferred: true}}
}

// sendRestartJob is what a committed RestartJob stage does: every agent
// is told, unless agents of the launch are not up yet.
func (p *Planner) sendRestartJob(arm Arm) []Action {
	p.tallyLast()
	if p.starting > 0 {
		p.held = p.epoch
		return []Action{AwaitLaunch{Epoch: p.epoch, Restarts: p.restarts, Starting: p.starting}, arm}
	}
	return []Action{RestartJob{Epoch: p.epoch, Restarts: p.restarts}, arm}
}

// LaunchUp: an agent that came up (AgentUp) got its share of the job: a
// restart held for the launch may go out now.
type LaunchUp struct{}

func (LaunchUp) isEvent() {}

// AwaitLaunch: a restart of the job (Epoch, Restarts) was decided while
// Starting agents of the launch are not up: the collectives in flight are
// dropped now, and the restart goes out (RestartJob, Deferred) once every
// agent is up.
type AwaitLaunch struct {
	Epoch    uint64
	Restarts int
	Starting int
}

func (AwaitLaunch) isAction() {}

// OpenCollective is a collective the root has not answered: Joined are the
// agents that gave their part.
type OpenCollective struct {
	Seq    uint64
	Op     string
	Joined map[int]bool
}

// Waiting: the collectives the root waits in, after a rank's clean end or
// a node's part: a node whose ranks all ended without joining one of them
// strands it.
type Waiting struct{ Open []OpenCollective }

func (Waiting) isEvent() {}

// waiting looks for a stranded collective: a node (an agent with ranks)
// whose ranks all ended and which did not join it. The first ends the
// job (Stranded decides, and nothing after it does).
func (p *Planner) waiting(ev Waiting) []Action {
	if p.Ending() {
		return nil
	}
	open := slices.SortedFunc(slices.Values(ev.Open), func(a, b OpenCollective) int { return cmp.Compare(a.Seq, b.Seq) })
	for _, c := range open {
		for a := range p.agents {
			if c.Joined[a] || !p.allEnded(a) {
				continue
			}
			// The planner ignores a node whose agent's loss is not
			// decided yet (its ranks' end is not final).
			if acts := p.Step(Stranded{Seq: c.Seq, Agent: a, Node: p.agents[a].node, Op: c.Op}); acts != nil {
				return acts
			}
		}
	}
	return nil
}

// allEnded reports whether agent a runs ranks and all of them count as
// ended.
func (p *Planner) allEnded(a int) bool {
	n := 0
	for r := range p.ranks {
		if p.ranks[r].agent != a {
			continue
		}
		if !p.led.ranks[r].ended {
			return false
		}
		n++
	}
	return n > 0
}

// Adopting: a successor's adoption of the lost root's children went on
// (one adopted, or given up): it leads once none is waited for.
type Adopting struct{}

func (Adopting) isEvent() {}

// Leads: a successor leads the agents now; the recovery of Epoch its
// predecessor left at Stage (0: none) is carried on (the actions that
// follow, LeaderChanged's).
type Leads struct {
	Epoch uint64
	Stage Stage
}

func (Leads) isAction() {}

// RefillGroup: the successor leads: its replica group may take a voter in
// place of the lost front-end's, hosted by Agent (-1: none can host it;
// refillCandidate).
type RefillGroup struct{ Agent int }

func (RefillGroup) isAction() {}

// adopting decides whether a successor leads the agents: once every child
// of the lost root was adopted, or its link ended, or it is being started
// again.
func (p *Planner) adopting(ev Adopting) []Action {
	if !p.cfg.Resumed || p.leads {
		return nil
	}
	for a, l := range p.links {
		if p.rootChild(a) && !l.adopted && !l.closed && !p.Relaunching(a) {
			return nil
		}
	}
	p.leads = true
	acts := append([]Action{Leads{Epoch: p.epoch, Stage: p.Stage()}}, p.restartStep(LeaderChanged{})...)
	return append(acts, RefillGroup{Agent: p.refillCandidate()})
}

// refillCandidate is the agent a successor asks to host a replica in
// place of the lost front-end's voter (-1: none). A child of the root is
// asked first (it can take over in turn); else, as under kary:2, whose
// only root children host the replicas already, the shallowest agent
// outside the subtree of this root's own agent (its link does not end
// with this root), in plan order: a voter that hands any leadership it
// wins to a child of the root (launch/agent's watchLeadership). Only an
// agent up, not being started again, without a replica
// (Config.ReplicaHosts) and reached through a child of the root this root
// holds the link of (adopted, or started by it).
func (p *Planner) refillCandidate() int {
	t, own, best := p.cfg.Tree, -1, -1
	for a := range p.agents {
		if p.agents[a].node == p.cfg.RootNode {
			own = a
		}
	}
	for a, l := range p.links {
		if !l.live() || slices.Contains(p.cfg.ReplicaHosts, a) || p.Relaunching(a) || !p.links[t.Top(a)].adopted {
			continue
		}
		if p.rootChild(a) {
			return a
		}
		if (own < 0 || !t.InSubtree(a, own)) && (best < 0 || t.Depth(a) < t.Depth(best)) {
			best = a
		}
	}
	return best
}
