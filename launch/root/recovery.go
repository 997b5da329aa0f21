package root

// The root's side of the restart protocol: it commits the planner's phases,
// sends their commands and feeds the agents' acknowledgements back.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// recoveryAckTimeout bounds each phase of a recovery (its acknowledgements).
const recoveryAckTimeout = 30 * time.Second

// evCommitted: a recovery phase is in the replicated log (or not: err).
type evCommitted struct {
	epoch uint64
	stage recovery.Stage
	err   error
	tree  uint64 // the last tree change recorded before it: committed with it
}

func (evCommitted) isRootEvent() {}

// plannerConfig is the recovery planner's configuration for this job.
func (fe *frontend) plannerConfig() recovery.Config {
	cfg := recovery.Config{
		Policy: fe.opts.Restart, Ranks: fe.opts.N, MaxRestarts: fe.opts.MaxRestarts,
		Agents: len(fe.agents), AckTimeout: recoveryAckTimeout,
		RankAgent: slices.Repeat([]int{-1}, fe.opts.N), Spares: fe.opts.Spares,
		Nodes: fe.agentNames(), Slots: fe.slots, Oversubscribe: fe.opts.Oversubscribe,
		OrphanWait: fe.opts.Timing.OrphanWait(fe.opts.Heartbeat), SelfFence: fe.selfFence(),
		Started: fe.start, Launching: true, KillAfter: fe.opts.KillAfter,
	}
	if fe.tree {
		cfg.Tree = fe.topo
	}
	for i, a := range fe.agents { // the others: -1, a successor's until RanksStarted
		for _, r := range a.ranks {
			cfg.RankAgent[r] = i
		}
	}
	return cfg
}

// feedLeader has a successor's planner look at its adoptions: it leads once
// each child was adopted or given up (recovery.Adopting → Leads).
func (fe *frontend) feedLeader() {
	if fe.role == roleSuccessor {
		fe.step(recovery.Adopting{})
	}
}

// commit puts a recovery phase in the state log; evCommitted follows.
func (fe *frontend) commit(act recovery.Commit) {
	rec, ph := act.Rec, act.Phase()
	fe.recoveryAt = time.Now()
	fe.journal.Start()
	done := make(chan error, 1)
	tree := fe.treeTells.Last()
	fe.journal.Commit(ph, done)
	fe.goFunc(func() {
		select {
		case err := <-done:
			fe.put(evCommitted{epoch: rec.Epoch, stage: rec.Stage, err: err, tree: tree})
		case <-fe.ctx.Done():
		}
	})
}

// holdEnv names a committed recovery phase the front-end stops at, for tests
// that kill it mid-recovery. Read once, by Run; successors do not hold.
const holdEnv = "FTLAUNCH_TEST_HOLD_RECOVERY"

// breakEnv breaks the recovery on purpose, for tests that show the chaos
// harness's checks can fail. Read once, by Run:
//   - skip-patch: patches go without their rows (ranks keep old addresses);
//   - no-fence: a lost agent's node is not fenced (its ranks outlive the job);
//   - no-terminate: a failed job's terminate is not sent, as if lost;
//   - no-table-record: the first node table is not recorded (a successor
//     learns it from the agents: MTableHeld);
//   - loseLeadHook: the front-end's replica hands the lead away just before
//     the first suspend phase is committed (journal.Config.LoseLeadAt).
const breakEnv = "FTLAUNCH_TEST_BREAK_RECOVERY"

// loseLeadHook is breakEnv's leadership blip at a recovery's commit.
const loseLeadHook = "lose-lead"

// committed takes a phase's commit. The tree changes recorded before it are
// told first, so that what the phase sends finds moved agents in place.
func (fe *frontend) committed(ev evCommitted) {
	if ev.err == nil {
		fe.treeCommitted(evTreeCommitted{seq: ev.tree})
	}
	if fe.hooks.holdAt != "" && ev.err == nil && ev.stage.String() == fe.hooks.holdAt {
		fe.warnf("test hook: holding the recovery at its committed %s phase (%s)", ev.stage, holdEnv)
		return
	}
	if ev.err != nil {
		fe.step(recovery.LaunchError{Msg: fmt.Sprintf("recovery (epoch %d): the %s phase could not be committed to the state log: %v", ev.epoch, ev.stage, ev.err)})
		return
	}
	fe.verbosef("recovery: %s phase of epoch %d committed", ev.stage, ev.epoch)
	fe.step(recovery.Committed{Epoch: ev.epoch, Stage: ev.stage})
}

// after posts ev to the event loop once d passed (unless the job ended).
func (fe *frontend) after(d time.Duration, ev event) {
	fe.goFunc(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			fe.put(ev)
		case <-fe.ctx.Done():
		}
	})
}

// recoveryAction carries out one of the restart protocol's actions; false
// for any other action.
func (fe *frontend) recoveryAction(act recovery.Action) bool {
	switch act := act.(type) {
	case recovery.Commit:
		fe.commit(act)
	case recovery.Arm: // the planner hears once the phase's bound passed
		fe.after(act.After, evPlanner{recovery.Expired{Epoch: act.Epoch, Stage: act.Stage}})
	case recovery.Relaunch:
		fe.relaunchAgent(act)
	case recovery.Suspend:
		fe.colls.Abandon(act.Epoch)
		fe.bcast(launcher.Command(act))
	case recovery.Respawn:
		_ = fe.agents[act.Agent].send(launcher.Command(act))
	case recovery.Patch:
		for _, row := range act.Rows {
			if row.Rank < len(fe.table) {
				fe.table[row.Rank] = row.Addr
			}
		}
		if fe.hooks.breakAt == "skip-patch" {
			fe.warnf("test hook: the node table's patch goes without its %d row(s) (%s)", len(act.Rows), breakEnv)
			act.Rows = nil
		}
		fe.bcast(launcher.Command(act))
	case recovery.Resume:
		fe.bcast(launcher.Command(act))
	case recovery.AwaitLaunch:
		// The restart goes to every agent once all are up (Deferred), so
		// that none starts its ranks as an older incarnation after it.
		fe.colls.Abandon(act.Epoch)
	case recovery.RestartJob:
		if !act.Deferred {
			fe.colls.Abandon(act.Epoch)
		}
		fe.bcast(launcher.Command(act))
	case recovery.RecoveryOver:
		fe.recoveryOver(act)
	case recovery.Fence:
		fe.fenceNode(act.Agent, act.Node, act.Incarnation)
	case recovery.AwaitSelfFence: // not reached by act.At: the node's own fence counts
		fe.fences.AwaitSelf(fe.ctx, act.Node, act.Incarnation, act.At, func() {
			fe.post(recovery.SelfFenceDue{Agent: act.Agent, Node: act.Node, Incarnation: act.Incarnation})
		})
	case recovery.SelfFenced: // told (narrate)
	case recovery.AloneOver:
		fe.aloneOver(act)
	case recovery.Leads:
		if act.Stage != 0 {
			fe.failedAt = time.Now()
		}
	case recovery.RefillGroup:
		fe.refillGroup(act)
	default:
		return false
	}
	return true
}

// aloneOver records and tells the end of a recovery that started ranks
// again alone (a program without the rank protocol, under --restart rank).
func (fe *frontend) aloneOver(act recovery.AloneOver) {
	fe.recoveries++
	after := time.Since(fe.failedAt)
	fe.journal.Commit(act.Phase(after), nil)
	for _, ri := range act.Recovered {
		fe.observe(RankRestarted{Rank: ri.Rank, Inc: ri.Incarnation})
	}
	fe.warnf("recovered: rank(s) %s started again (%.0f ms after the failure)", strings.ReplaceAll(recovery.RanksText(act.Ranks), " ", ", "), ms(after))
}

// recoveryAck hands the planner an agent's acknowledgement in the restart
// protocol (proto.DecodeUp decodes only those launcher.AckEvent knows).
func (fe *frontend) recoveryAck(a *agentHandle, m proto.RecAck) {
	fe.step(launcher.AckEvent(a.idx, a.name, m))
	if m.Type == proto.MRespawned {
		fe.observe(RankRestarted{Rank: m.Rank, Inc: m.Incarnation})
	}
}

// recoveryOver records and tells a recovery's end (every live agent
// acknowledged its last phase), with the time since the failure.
func (fe *frontend) recoveryOver(act recovery.RecoveryOver) {
	fe.recoveries++
	after := time.Since(fe.failedAt)
	ph := act.Phase(after)
	fe.journal.Commit(ph, nil)
	told := "every rank runs again"
	if act.Stage == recovery.StageRestartJob {
		told = "every rank started again"
	}
	fe.warnf("recovered: %s (%.0f ms after the failure)", told, ms(after))
	fe.observe(Recovered{Epoch: act.Epoch, Stage: ph.Stage})
}
