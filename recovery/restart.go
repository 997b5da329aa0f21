package recovery

import (
	"fmt"
	"slices"
	"time"
)

// The restart protocol, as the planner runs it.
//
// Policy Rank, for a failed rank R (and any that fail while it runs):
//
//	commit Suspend(epoch, failed)  →  Suspend to every agent; each acknowledges
//	commit Respawn                 →  Respawn R on its node as incarnation+1
//	                                  (the new rank's address comes back)
//	commit Patch(version+1, rows)  →  Patch to every agent; each acknowledges
//	commit Resume                  →  Resume; the job runs again
//
// Policy Job: commit RestartJob(epoch, restarts) → RestartJob to every agent
// (they end their ranks and start them again as the next incarnation, with
// a fresh PMI key space); each acknowledges.
//
// Every phase is committed before its commands are sent (the Commit action,
// then the Committed event); every command carries the epoch (and a patch
// its table version), so agents refuse older ones. A failure during a
// recovery bumps the epoch and starts again at Suspend, with the failed
// ranks of both; ranks already respawned keep their new incarnation and
// are patched with the rest. A leader change bumps the epoch and commits
// the phase it found committed again, then sends its commands again:
// respawns are keyed by (rank, incarnation), so a respawn sent twice
// starts one process. Acknowledgements of an older epoch, and ends of an
// older incarnation, are ignored.

// Stage is where a recovery stands.
type Stage int

const (
	StageSuspend    Stage = iota + 1 // ranks are being suspended
	StageRespawn                     // failed ranks are being started again
	StagePatch                       // the node table is being patched
	StageResume                      // ranks are told to go on
	StageRestartJob                  // every rank is being started again (policy Job)
	StageRelaunch                    // lost agents are being started again (relaunch.go)
)

func (s Stage) String() string {
	switch s {
	case StageSuspend:
		return "suspend"
	case StageRespawn:
		return "respawn"
	case StagePatch:
		return "patch"
	case StageResume:
		return "resume"
	case StageRestartJob:
		return "restart-job"
	case StageRelaunch:
		return "relaunch"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// rankSt is where one rank stands.
type rankSt int

const (
	rRunning    rankSt = iota
	rEnded             // ended (cleanly, or for good)
	rFailed            // failed: to be respawned
	rRespawning        // respawn sent: its address is awaited
	rRespawned         // its address came: to be patched
)

type rankState struct {
	agent    int
	inc      uint64 // current incarnation, from 1
	st       rankSt
	sent     bool   // the respawn of inc was sent under this planner
	addr     []byte // a respawned rank's address, for the patch
	restarts int
	history  []Ended // how each incarnation ended, for the job's end
}

// recovering is a recovery in progress.
type recovering struct {
	stage     Stage
	committed bool         // the stage's record is committed; its commands went out
	acks      map[int]bool // agents that acknowledged the stage (this epoch)
	// alone: ranks are started again alone (alone.go): no suspension,
	// no patch, no resume; a rank is over once it runs (RankStarted).
	alone bool
}

// RankRecord is one rank's part of a committed record.
type RankRecord struct {
	Rank        int
	Agent       int
	Incarnation uint64
	Addr        []byte // a respawned rank's address (patch)
	Restarts    int
	Failed      bool // not respawned yet: Incarnation is the one that failed
}

// Checkpoint is what each phase commits: enough for a new leader to carry
// the recovery on from it.
type Checkpoint struct {
	Epoch    uint64
	Stage    Stage
	Version  uint64        // the node table's version once patched
	Restarts int           // job restarts so far
	Ranks    []RankRecord  // the ranks being recovered
	Agents   []AgentRecord `json:",omitempty"` // the agents being started again
	// Alone: the ranks are started again alone (alone.go).
	Alone bool `json:",omitempty"`
}

// Epoch is the recovery epoch: it grows with every recovery decision and
// every leader change.
func (p *Planner) Epoch() uint64 { return p.epoch }

// Version is the node table's version.
func (p *Planner) Version() uint64 { return p.version }

// Incarnation is rank r's current incarnation.
func (p *Planner) Incarnation(r int) uint64 { return p.ranks[r].inc }

// Replacing reports whether rank r is being started again: its end is
// not the rank's.
func (p *Planner) Replacing(r int) bool {
	if r < 0 || r >= len(p.ranks) {
		return false
	}
	st := p.ranks[r].st
	return st == rFailed || st == rRespawning || st == rRespawned
}

// AwaitsRespawn reports whether rank r failed and its next incarnation was
// not started yet: the end recorded for it is the failed one's.
func (p *Planner) AwaitsRespawn(r int) bool {
	return r >= 0 && r < len(p.ranks) && p.ranks[r].st == rFailed
}

// Stage is the stage of the recovery in progress, or 0.
func (p *Planner) Stage() Stage {
	if p.rc == nil {
		return 0
	}
	return p.rc.stage
}

// rankFailed takes a rank's failure under a restart policy.
func (p *Planner) rankFailed(ev RankExited) []Action {
	rs := &p.ranks[ev.Rank]
	rs.history = append(rs.history, Ended{Incarnation: rs.inc, How: ev.Describe()})
	failed := Reason{Rank: ev.Rank, Node: ev.Node, Text: ev.Describe(), Max: p.cfg.MaxRestarts}
	decided := func(why Reason) []Action {
		return append([]Action{Record{Why: why, Node: ev.Node, Rank: ev.Rank}, Report{Why: why}}, p.begin(p.beforeRestart(StageRestartJob))...)
	}
	limit := func(restarts int, jobWide bool) []Action {
		rs.st = rEnded
		why := failed
		why.Kind, why.Restarts, why.JobWide, why.History = ReasonRestartLimit, restarts, jobWide, slices.Clone(rs.history)
		return p.endFor(ev.Node, ev.Rank, ev.ExitCode(), why)
	}
	if p.cfg.Policy == Job {
		if p.restarts >= p.cfg.MaxRestarts {
			return limit(p.restarts, true)
		}
		p.owe(ev.Rank, rs.inc+1) // named as recovered by the restart it causes
		p.restartJob()
		why := failed
		why.Kind, why.Restarts = ReasonJobRestart, p.restarts
		return decided(why)
	}
	alone, opened := p.replaceAlone()
	if opened {
		rs.st = rEnded
		why := failed
		why.Kind = ReasonNoTable
		return p.endFor(ev.Node, ev.Rank, ev.ExitCode(), why)
	}
	if rs.restarts >= p.cfg.MaxRestarts {
		return limit(rs.restarts, false)
	}
	rs.restarts++
	rs.st, rs.sent, rs.addr = rFailed, false, nil
	why := failed
	why.Kind, why.Incarnation, why.Restarts, why.Alone = ReasonRankRestart, rs.inc+1, rs.restarts, alone
	acts := []Action{Record{Why: why, Node: ev.Node, Rank: ev.Rank}, Report{Why: why}}
	if alone {
		return append(acts, p.beginAlone(p.beforeRestart(StageRespawn))...)
	}
	return append(acts, p.begin(StageSuspend)...)
}

// restartJob decides a restart of the job (policy Job): every rank,
// ended ones too, starts again as its next incarnation, so that the ends
// of the running incarnations are stale from now on.
func (p *Planner) restartJob() {
	p.restarts++
	for r := range p.ranks {
		p.ranks[r].inc++
		p.ranks[r].st, p.ranks[r].sent, p.ranks[r].addr = rRunning, false, nil
	}
}

// begin starts a stage under a new epoch: its record is committed first.
func (p *Planner) begin(s Stage) []Action {
	p.epoch++
	p.phase = Recovering
	p.rc = &recovering{stage: s, acks: map[int]bool{}}
	return []Action{p.commit()}
}

// beginAlone is begin for a recovery that starts ranks again alone
// (alone.go): nothing is suspended or patched.
func (p *Planner) beginAlone(s Stage) []Action {
	p.epoch++
	p.phase = Recovering
	p.rc = &recovering{stage: s, acks: map[int]bool{}, alone: true}
	return []Action{p.commit()}
}

// beforeRestart is the stage a recovery goes to before s, a stage that
// starts ranks (Respawn, RestartJob): Relaunch while a lost agent is not
// up again or a lost incarnation's fence is not confirmed (FenceDone),
// else s itself.
func (p *Planner) beforeRestart(s Stage) Stage {
	if !p.relaunchDone() {
		return StageRelaunch
	}
	return s
}

// checkpoint is the committed form of the recovery in progress.
func (p *Planner) checkpoint() Checkpoint {
	rec := Checkpoint{Epoch: p.epoch, Stage: p.rc.stage, Version: p.version, Restarts: p.restarts, Agents: p.agentRecords(), Alone: p.rc.alone}
	if p.rc.stage == StagePatch {
		rec.Version = p.version + 1
	}
	for r, rs := range p.ranks {
		if rs.st == rFailed || rs.st == rRespawning || rs.st == rRespawned {
			rec.Ranks = append(rec.Ranks, RankRecord{Rank: r, Agent: rs.agent, Incarnation: rs.inc, Addr: rs.addr, Restarts: rs.restarts, Failed: rs.st == rFailed})
		}
	}
	return rec
}

// Settled is the committed form of a recovery carried out to its end
// (Stage 0): the epoch, the node table's version, the job's restarts and
// every agent started again so far, with its node and incarnation. A new
// leader's Restore of it carries nothing on, and knows those agents.
func (p *Planner) Settled() Checkpoint {
	return Checkpoint{Epoch: p.epoch, Version: p.version, Restarts: p.restarts, Agents: p.agentRecords()}
}

// restartStep takes the restart protocol's own events.
func (p *Planner) restartStep(ev Event) []Action {
	if _, ok := ev.(LeaderChanged); ok {
		if p.rc == nil {
			p.epoch++
			return nil
		}
		// The new leader commits the stage it found again, under a new
		// epoch, and sends its commands again once that is committed.
		p.epoch++
		p.rc.committed, p.rc.acks = false, map[int]bool{}
		for r := range p.ranks {
			p.ranks[r].sent = false
		}
		for a := range p.agents {
			p.agents[a].sent = false
		}
		// The fences the lost leader had not seen confirmed are this
		// leader's to carry out (and confirm) again.
		return append([]Action{p.commit()}, p.fencesAgain()...)
	}
	rc := p.rc
	if rc == nil || p.phase != Recovering {
		return nil // a recovery that was dropped (the job is ending) or is over
	}
	switch ev := ev.(type) {
	case Committed:
		if ev.Epoch != p.epoch || ev.Stage != rc.stage || rc.committed {
			return nil
		}
		rc.committed = true
		return p.send()
	case Suspended:
		if ev.Epoch == p.epoch && rc.stage == StageSuspend && rc.committed {
			rc.acks[ev.Agent] = true
			if p.allAcked() {
				return p.afterSuspend()
			}
		}
	case Respawned:
		if ev.Rank < 0 || ev.Rank >= len(p.ranks) {
			return nil
		}
		rs := &p.ranks[ev.Rank]
		if ev.Incarnation != rs.inc || rs.st != rRespawning {
			return nil // an older incarnation, or heard already
		}
		if rc.alone {
			// A rank started again alone that published: it runs, and
			// nothing is patched.
			return p.rankStarted(RankStarted{Rank: ev.Rank, Incarnation: ev.Incarnation})
		}
		rs.st, rs.addr = rRespawned, slices.Clone(ev.Addr)
		if rc.stage == StageRespawn && rc.committed && !p.any(rFailed, rRespawning) {
			return p.next(StagePatch)
		}
	case Patched:
		if ev.Epoch == p.epoch && ev.Version == p.version+1 && rc.stage == StagePatch && rc.committed {
			rc.acks[ev.Agent] = true
			if p.allAcked() {
				p.version++
				for r := range p.ranks {
					if p.ranks[r].st == rRespawned {
						p.ranks[r].st, p.ranks[r].addr = rRunning, nil
					}
				}
				return p.next(StageResume)
			}
		}
	case Restarted:
		if ev.Epoch == p.epoch && rc.stage == StageRestartJob && rc.committed {
			rc.acks[ev.Agent] = true
			if p.allAcked() {
				p.phase, p.rc = Running, nil
			}
		}
	case Resumed:
		// Resume needs no acknowledgement to go on: the recovery ended
		// when Resume was sent. Late ones are harmless.
	case Expired:
		if ev.Epoch != p.epoch || ev.Stage != rc.stage {
			return nil
		}
		var missing []Awaited
		switch rc.stage {
		case StageRespawn:
			for r, rs := range p.ranks {
				if rs.st == rFailed || rs.st == rRespawning {
					missing = append(missing, Awaited{Rank: r, Agent: NoAgent})
				}
			}
		case StageRelaunch:
			for _, as := range p.agents {
				if as.st != aUp {
					missing = append(missing, Awaited{Rank: NoRank, Agent: NoAgent, Node: as.node})
				}
				for _, f := range as.fences {
					missing = append(missing, Awaited{Rank: NoRank, Agent: NoAgent, Node: f.Node, Incarnation: f.Incarnation})
				}
			}
		default:
			for a := range p.cfg.Agents {
				if p.agents[a].st == aUp && !rc.acks[a] {
					missing = append(missing, Awaited{Rank: NoRank, Agent: a})
				}
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return p.endJob(ExitLauncher, Reason{Kind: ReasonExpired, Rank: NoRank, Epoch: p.epoch, Stage: rc.stage, Limit: p.cfg.AckTimeout, Awaited: missing})
	}
	return nil
}

// next moves the recovery to stage s (same epoch): commit it first.
func (p *Planner) next(s Stage) []Action {
	p.rc.stage, p.rc.committed, p.rc.acks = s, false, map[int]bool{}
	return []Action{p.commit()}
}

// send is what a committed stage does.
func (p *Planner) send() []Action {
	rc := p.rc
	arm := Arm{Epoch: p.epoch, Stage: rc.stage, After: p.cfg.AckTimeout}
	switch rc.stage {
	case StageSuspend:
		if p.allAcked() {
			// No agent runs ranks to suspend (the only one was lost), or
			// each acknowledged already (a relaunched one has none).
			return append([]Action{Suspend{Epoch: p.epoch}}, p.afterSuspend()...)
		}
		return []Action{Suspend{Epoch: p.epoch}, arm}
	case StageRespawn:
		var acts []Action
		for r := range p.ranks {
			rs := &p.ranks[r]
			if rs.st == rFailed {
				rs.inc++
				rs.st = rRespawning
			}
			if rs.st == rRespawning && !rs.sent {
				rs.sent = true
				p.led.owed[r] = rs.inc
				p.led.ranks[r].runs = rs.inc // what its agent runs from now on (an end of an older one is stale)
				acts = append(acts, Respawn{Rank: r, Agent: rs.agent, Incarnation: rs.inc, Epoch: p.epoch})
			}
			if rs.st == rRespawning && rc.alone && !slices.Contains(p.alone, r) {
				p.alone = append(p.alone, r)
			}
		}
		if rc.alone && !p.any(rRespawning) {
			return p.aloneOver() // every rank runs already (sent again after a leader change)
		}
		if !p.any(rRespawning) {
			// Every address came already (sent again after a leader
			// change, say): on to the patch.
			return p.next(StagePatch)
		}
		return append(acts, arm)
	case StagePatch:
		pa := Patch{Epoch: p.epoch, Version: p.version + 1}
		for r, rs := range p.ranks {
			if rs.st == rRespawned {
				pa.Rows = append(pa.Rows, RankRecord{Rank: r, Agent: rs.agent, Incarnation: rs.inc, Addr: rs.addr, Restarts: rs.restarts})
			}
		}
		return []Action{pa, arm}
	case StageResume:
		p.phase, p.rc = Running, nil
		p.tallyLast()
		return []Action{Resume{Epoch: p.epoch, Version: p.version}}
	case StageRestartJob:
		return p.sendRestartJob(arm)
	case StageRelaunch:
		return p.sendRelaunch(arm)
	}
	panic(fmt.Sprintf("recovery: stage %v has nothing to send", rc.stage))
}

// allAcked reports whether every agent that runs acknowledged the stage
// (an agent lost and not started again yet has nothing to acknowledge).
func (p *Planner) allAcked() bool {
	for a := range p.cfg.Agents {
		if p.agents[a].st == aUp && !p.rc.acks[a] {
			return false
		}
	}
	return true
}

func (p *Planner) any(sts ...rankSt) bool {
	for _, rs := range p.ranks {
		if slices.Contains(sts, rs.st) {
			return true
		}
	}
	return false
}

// Restore gives a planner of a new leader the recovery its predecessor
// committed last (rec.Epoch is 0: none; rec.Stage is 0: one carried out
// to its end, Settled). The next event to give it is
// LeaderChanged, which commits that stage again under a new epoch.
func (p *Planner) Restore(rec Checkpoint) {
	p.epoch, p.version, p.restarts = rec.Epoch, rec.Version, rec.Restarts
	if rec.Stage == StagePatch {
		p.version = rec.Version - 1 // the patch is not applied yet
	}
	for _, rr := range rec.Ranks {
		if rr.Rank < 0 || rr.Rank >= len(p.ranks) {
			continue
		}
		rs := &p.ranks[rr.Rank]
		rs.agent, rs.inc, rs.restarts, rs.addr = rr.Agent, rr.Incarnation, rr.Restarts, slices.Clone(rr.Addr)
		switch {
		case rr.Failed:
			rs.st = rFailed
		case rr.Addr != nil:
			rs.st = rRespawned
		default:
			rs.st = rRespawning
		}
	}
	p.restoreAgents(rec.Agents)
	if p.cfg.Policy == Job && rec.Epoch > 0 {
		// Every rank's incarnation follows the job's restarts, decided
		// (a relaunch first) or done: the node table may not say so yet.
		for r := range p.ranks {
			p.ranks[r].inc = max(p.ranks[r].inc, uint64(rec.Restarts)+1)
		}
	}
	if rec.Epoch == 0 || rec.Stage == 0 {
		return // no recovery ever began, or the last one was carried out (Settled)
	}
	// Ranks the recovery carries on starts again (those of a lost agent,
	// say) are running, whatever the table says of their end.
	defer func() {
		for r := range p.ranks {
			if p.Replacing(r) && (p.AwaitsRespawn(r) || p.olderEnd(r)) || p.RestartsJob() && p.olderEnd(r) {
				p.revive(r)
			}
		}
	}()
	// The stage committed last is carried out again, Resume too: the old
	// leader may have died between committing it and sending it (the
	// planner's tests found that), and every command is idempotent.
	p.phase = Recovering
	p.rc = &recovering{stage: rec.Stage, acks: map[int]bool{}, alone: rec.Alone}
	if rec.Alone {
		for _, rr := range rec.Ranks {
			p.alone = append(p.alone, rr.Rank)
		}
	}
}

// Events of the restart protocol.

// TablePublished: the first node table went to every rank. Under policy
// Rank a failure before it ends the job: a rank can be replaced only in a
// job whose table exists to be patched.
type TablePublished struct{}

// PMIInit: a rank initialized PMI-1 (an MPI program).
type PMIInit struct {
	Rank int
	Node string
}

// Committed: a Commit action's record is in the replicated log.
type Committed struct {
	Epoch uint64
	Stage Stage
}

// Suspended: an agent's ranks are all suspended (or stopped) for epoch.
type Suspended struct {
	Agent int
	Epoch uint64
}

// Respawned: a respawned rank runs and published its address.
type Respawned struct {
	Rank        int
	Incarnation uint64
	Addr        []byte
}

// Patched: an agent holds the node table of Version and gave it to its
// ranks.
type Patched struct {
	Agent   int
	Epoch   uint64
	Version uint64
}

// Resumed: an agent's ranks run again (the recovery is over once every
// agent whose link has not ended acknowledged it, RecoveryOver).
type Resumed struct {
	Agent int
	Epoch uint64
}

// Restarted: an agent ended its ranks and started them again (policy
// Job), acknowledged as Resumed is.
type Restarted struct {
	Agent int
	Epoch uint64
}

// Expired: the bound armed for a stage of epoch passed.
type Expired struct {
	Epoch uint64
	Stage Stage
}

// LeaderChanged: this planner now serves the root's leader (a successor
// that restored the committed record, or a leader elected again).
type LeaderChanged struct{}

func (PMIInit) isEvent()        {}
func (TablePublished) isEvent() {}
func (Committed) isEvent()      {}
func (Suspended) isEvent()      {}
func (Respawned) isEvent()      {}
func (Patched) isEvent()        {}
func (Resumed) isEvent()        {}
func (Restarted) isEvent()      {}
func (Expired) isEvent()        {}
func (LeaderChanged) isEvent()  {}

// Actions of the restart protocol.

// Commit puts a record in the replicated log; Committed comes back once it
// is there. Nothing that depends on it is sent before. Recovered are the
// ranks the recovery started again (the ledger's, ledger.go), for the
// record of a stage that ends it (Resume, RestartJob).
type Commit struct {
	Rec       Checkpoint
	Recovered []RankInc
}

// Suspend tells every agent to suspend its ranks (an event to client
// library ranks, SIGSTOP to the others) and acknowledge.
type Suspend struct{ Epoch uint64 }

// Respawn tells an agent to start rank Rank again as Incarnation.
type Respawn struct {
	Rank        int
	Agent       int
	Incarnation uint64
	Epoch       uint64
}

// Patch gives every agent the node table's new rows (Version).
type Patch struct {
	Epoch   uint64
	Version uint64
	Rows    []RankRecord
}

// Resume tells every agent to let its ranks go on.
type Resume struct {
	Epoch   uint64
	Version uint64
}

// RestartJob tells every agent to end its ranks and start them again.
// Deferred: it waited for the launch's agents (AwaitLaunch dropped the
// collectives in flight then).
type RestartJob struct {
	Epoch    uint64
	Restarts int
	Deferred bool
}

// Arm asks the root for an Expired event of (Epoch, Stage) After from now.
type Arm struct {
	Epoch uint64
	Stage Stage
	After time.Duration
}

func (Commit) isAction()     {}
func (Suspend) isAction()    {}
func (Respawn) isAction()    {}
func (Patch) isAction()      {}
func (Resume) isAction()     {}
func (RestartJob) isAction() {}
func (Arm) isAction()        {}
