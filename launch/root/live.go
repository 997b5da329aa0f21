package root

import (
	"cmp"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// liveInterval is how often a running root rewrites its live report.
const liveInterval = time.Second

// live is what the root knows now.
func (fe *frontend) live() journal.Live {
	l := journal.Live{
		Job: fe.jobID, Root: fe.rootNode, Phase: "running", Updated: time.Now(), Start: cmp.Or(fe.jobStart, fe.start),
		Argv: fe.opts.Argv, Agents: len(fe.agents), N: fe.opts.N,
		Ended: fe.ledger().EndedCount(), Failover: fe.status().Resumed, Term: fe.rootTerm, Table: len(fe.table) > 0,
	}
	if n, missing := fe.links().Standbys(); n > 0 && len(missing) == 0 {
		l.BackupsUp = true
	}
	// The agents up now (their link open): agentsUp counts every start,
	// a lost agent's next incarnation's too.
	l.AgentsUp = fe.links().UpNow()
	// Counted, not started - ended: ranks that never started end too
	// (a failed start, an agent that never came up). Once a second.
	for i := range fe.ranks {
		if fe.ledger().Started(i) && !fe.ledger().Ended(i) {
			l.Running++
		}
	}
	switch {
	case !fe.shutdownAt.IsZero():
		l.Phase = "ending"
	case fe.terminating || fe.status().Failure != nil:
		l.Phase = "terminating"
	case fe.agentsUp < len(fe.agents) || fe.ledger().StartedCount() < fe.opts.N:
		l.Phase = "launching"
	}
	status := fe.status()
	if f := status.Failure; f != nil {
		l.Failure = f.Why.Words()
	}
	l.Recoveries = fe.recoveries
	l.ReplicasJoined = fe.journal.Joined()
	if st := status.Stage; st != 0 {
		r := &journal.LiveRecovery{Stage: st.String(), Epoch: status.Epoch, Failed: fe.failedAt}
		if fe.recoveryAt.After(fe.failedAt) {
			r.Phase = fe.recoveryAt
		}
		if st != recovery.StageRestartJob {
			for i := range fe.ranks {
				if fe.ledger().InRecovery(i) {
					r.Ranks = append(r.Ranks, i)
				}
			}
		}
		l.Recovery = r
	}
	return l
}

// writeLive replaces the job's live report (journal.WriteLive). Errors
// are not the job's: a report that cannot be written is only missing.
func (fe *frontend) writeLive() {
	if fe.journal == nil || fe.journal.Closing() || fe.journal.Dir() == "" {
		return
	}
	_ = journal.WriteLive(fe.journal.Dir(), fe.rootNode, fe.live())
}

// removeLive removes the live report once the final status is committed.
func (fe *frontend) removeLive() {
	if fe.journal == nil || fe.journal.Dir() == "" {
		return
	}
	if err := journal.RemoveLive(fe.journal.Dir()); err != nil {
		fe.warnf("%v", err)
	}
}
