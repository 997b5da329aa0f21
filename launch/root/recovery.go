package root

// The root's side of the restart protocol: it carries out the planner's
// recovery actions (commit a phase, then send its commands) and feeds the
// agents' acknowledgements back to it.

import (
	"fmt"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// recoveryAckTimeout bounds each phase of a recovery: the agents'
// acknowledgements, or a respawned rank's address.
const recoveryAckTimeout = 30 * time.Second

// evCommitted: a recovery phase is in the replicated log (or could not be
// put there: err).
type evCommitted struct {
	epoch uint64
	stage recovery.Stage
	err   error
	// tree is the last tree change recorded before the phase: committed
	// with it (the state log commits in order), and told first.
	tree uint64
}

func (evCommitted) isRootEvent() {}

// plannerConfig is the recovery planner's configuration for this job.
func (fe *frontend) plannerConfig() recovery.Config {
	cfg := recovery.Config{
		Policy: fe.opts.Restart, Ranks: fe.opts.N, MaxRestarts: fe.opts.MaxRestarts,
		Agents: len(fe.agents), AckTimeout: recoveryAckTimeout,
		RankAgent: make([]int, fe.opts.N), Spares: fe.opts.Spares,
		Nodes: fe.agentNames(), Slots: fe.slots, Oversubscribe: fe.opts.Oversubscribe,
		OrphanWait: fe.orphanWait(), SelfFence: fe.selfFence(), Started: fe.start, Launching: true, KillAfter: fe.opts.KillAfter,
	}
	if fe.tree {
		cfg.Tree = fe.topo
	}
	for r := range cfg.RankAgent {
		cfg.RankAgent[r] = -1 // a successor learns where it runs (RanksStarted)
	}
	for i, a := range fe.agents {
		for _, r := range a.ranks {
			cfg.RankAgent[r] = i
		}
	}
	return cfg
}

// restartName is a policy as the job's record keeps it ("" for none).
// mpiName names what --mpi serves the ranks, for --verbose and the state
// log.
func mpiName(mpi string) string {
	if mpi == "" {
		return "pmi1+pmix"
	}
	return mpi
}

func restartName(p recovery.Policy) string {
	if p == recovery.None {
		return ""
	}
	return p.String()
}

// feedLeader tells a successor's planner how its adoption of the root's
// children stands: it leads once every one was adopted or given up
// (recovery.Adopting → Leads), and carries on the recovery its
// predecessor left from its last committed phase.
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
		var err error
		select {
		case err = <-done:
		case <-fe.ctx.Done():
			return
		}
		fe.put(evCommitted{epoch: rec.Epoch, stage: rec.Stage, err: err, tree: tree})
	})
}

// holdEnv names a recovery phase at which the front-end stops once it is
// committed, saying so on stderr ("ftlaunch: test hook: holding …"): for
// tests that kill the front-end in the middle of a recovery. Read once, by
// Run; successors do not hold.
const holdEnv = "FTLAUNCH_TEST_HOLD_RECOVERY"

// breakEnv breaks the recovery on purpose, for tests that show the chaos
// harness's checks can fail: "skip-patch" sends every node-table patch
// without its rows, so that ranks resume with the replaced rank's old
// address; "no-fence" skips the fence from outside of a lost agent's node
// (fence.go), so that a stopped agent's ranks outlive the job's end;
// "no-terminate" does not send the terminate of a failed job, as if it
// were lost on its way (recovery/overdue.go); "no-table-record" does not
// record the first node table, as if the front-end were lost between the
// table's answer and its commit (a successor then learns it from the
// agents: MTableHeld); loseLeadHook has the front-end's replica lose the
// lead of a group of three or five at the first recovery's suspend phase,
// just before it is committed (journal.Config.LoseLeadAt). Read once, by
// Run.
const breakEnv = "FTLAUNCH_TEST_BREAK_RECOVERY"

// loseLeadHook is breakEnv's leadership blip at a recovery's commit.
const loseLeadHook = "lose-lead"

// committed takes a phase's commit. The tree changes recorded before it
// are committed with it: the agents are told of them first, so that what
// the phase sends finds them in their new places (a moved agent gets the
// collective answers it missed before a Suspend abandons them: moved).
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

// arm tells the planner once the bound of a recovery phase passed.
func (fe *frontend) arm(act recovery.Arm) {
	fe.after(act.After, evPlanner{recovery.Expired{Epoch: act.Epoch, Stage: act.Stage}})
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

// recoveryAction carries out one of the restart protocol's actions; it
// reports false for an action that is not one of them.
func (fe *frontend) recoveryAction(act recovery.Action) bool {
	switch act := act.(type) {
	case recovery.Commit:
		fe.commit(act)
	case recovery.Arm:
		fe.arm(act)
	case recovery.Relaunch:
		fe.relaunchAgent(act)
	case recovery.Suspend:
		fe.colls.Abandon(act.Epoch)
		fe.bcast(proto.MSuspend, proto.RecMsg{Epoch: act.Epoch}.Encode())
	case recovery.Respawn:
		_ = fe.agents[act.Agent].send(proto.MRespawn, proto.RecMsg{Epoch: act.Epoch, Rank: act.Rank, Incarnation: act.Incarnation}.Encode())
	case recovery.Patch:
		m := proto.RecMsg{Epoch: act.Epoch, Version: act.Version}
		for _, row := range act.Rows {
			m.Rows = append(m.Rows, proto.RecRow{Rank: row.Rank, Incarnation: row.Incarnation, Addr: row.Addr})
			if row.Rank < len(fe.table) {
				fe.table[row.Rank] = row.Addr
			}
		}
		if fe.hooks.breakAt == "skip-patch" {
			fe.warnf("test hook: the node table's patch goes without its %d row(s) (%s)", len(m.Rows), breakEnv)
			m.Rows = nil
		}
		fe.bcast(proto.MPatch, m.Encode())
	case recovery.Resume:
		fe.bcast(proto.MResume, proto.RecMsg{Epoch: act.Epoch, Version: act.Version}.Encode())
	case recovery.AwaitLaunch:
		// During the launch: the restart goes to every agent once all
		// are up (RestartJob, Deferred), so that none starts its ranks as
		// an older incarnation after it.
		fe.colls.Abandon(act.Epoch)
	case recovery.RestartJob:
		if !act.Deferred {
			fe.colls.Abandon(act.Epoch)
		}
		fe.bcast(proto.MRestartJob, proto.RecMsg{Epoch: act.Epoch, Restarts: act.Restarts}.Encode())
	case recovery.RecoveryOver:
		fe.recoveryOver(act)
	case recovery.Fence:
		fe.fenceNode(act.Agent, act.Node, act.Incarnation)
	case recovery.AwaitSelfFence:
		fe.awaitSelfFence(act)
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

// aloneOver ends a recovery that started ranks again alone (a program
// that never opened the rank protocol, under --restart rank): the record
// says it is over, with what a successor must know of it, and the user
// is told.
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
// protocol (decoded by proto.DecodeUp).
func (fe *frontend) recoveryAck(a *agentHandle, m proto.RecAck) {
	switch m.Type {
	case proto.MSuspended:
		fe.step(recovery.Suspended{Agent: a.idx, Epoch: m.Epoch})
	case proto.MRespawned:
		fe.step(recovery.Respawned{Rank: m.Rank, Incarnation: m.Incarnation, Addr: m.Addr})
		fe.observe(RankRestarted{Rank: m.Rank, Inc: m.Incarnation})
	case proto.MPatched:
		fe.step(recovery.Patched{Agent: a.idx, Epoch: m.Epoch, Version: m.Version})
	case proto.MResumed:
		fe.step(recovery.Resumed{Agent: a.idx, Epoch: m.Epoch})
	case proto.MRestarted:
		fe.step(recovery.Restarted{Agent: a.idx, Epoch: m.Epoch})
	case proto.MPMIInit:
		fe.step(recovery.PMIInit{Rank: m.Rank, Node: a.name})
	case proto.MRankProto:
		fe.step(recovery.ProtocolOpened{Rank: m.Rank, Node: a.name})
	}
}

// recoveryOver records and tells a recovery's end, which the planner
// decided once every live agent acknowledged its last phase, with the
// time since the failure.
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
