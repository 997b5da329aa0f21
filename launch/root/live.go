package root

import (
	"cmp"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// live is what the root knows now: the planner's share is its ledger's
// (recovery.Ledger.Live).
func (fe *frontend) live() journal.Live {
	l := journal.Live{
		Job: fe.jobID, Root: fe.rootNode, Updated: time.Now(), Start: cmp.Or(fe.jobStart, fe.start),
		Argv: fe.opts.Argv, Agents: len(fe.agents), N: fe.opts.N, Term: fe.rootTerm, Table: len(fe.table) > 0,
		Recoveries: fe.recoveries, ReplicasJoined: fe.journal.Joined(),
	}
	fe.ledger().Live(&l)
	l.SetPhase(!fe.shutdownAt.IsZero(), fe.terminating || fe.status().Failure != nil,
		fe.agentsUp < len(fe.agents) || fe.ledger().StartedCount() < fe.opts.N)
	l.RecoveryAt(fe.failedAt, fe.recoveryAt)
	return l
}

// writeLive replaces the job's live report (journal.Group.WriteLive).
func (fe *frontend) writeLive() { fe.journal.WriteLive(fe.rootNode, fe.live) }
