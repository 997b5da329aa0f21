package recovery

import "slices"

// Starting ranks again alone, under policy Rank.
//
// The restart protocol's suspension, patch and resume are for programs
// that speak ftlaunch's rank protocol (the client library): they hold a
// node table to patch and can wait at a safe point. A plain executable
// (a shell loop, an ensemble member, a service) never opens the protocol:
// there is nothing to suspend or patch, and its failed rank is started
// again alone, as PRRTE's --enable-recovery does:
//
//	commit Respawn (epoch+1; the failed ranks)  →  Respawn each on its agent
//	                                                as incarnation+1
//	RankStarted for each                         →  AloneOver: the recovery ends
//
// and for a lost agent, its ranks after it is up again:
//
//	commit Relaunch (epoch+1)  →  Relaunch, Relaunched, every fence confirmed
//	commit Respawn             →  as above
//
// Which one a failure gets is decided when it happens (replaceAlone): the
// full protocol once the first node table was published; alone while no
// rank opened the rank protocol; a job whose ranks opened it but have no
// table yet cannot be recovered under Rank, and ends saying so. A rank
// that initializes PMI-1 (MPI) ends a Rank job at once (PMIInit), as MPI
// cannot replace one rank; Job restarts every rank instead.

// replaceAlone reports, under policy Rank, whether a failure now starts
// its ranks again alone (no rank opened the rank protocol, and no node
// table exists), or whether it cannot be recovered (noTable): ranks
// opened the protocol, and their table does not exist yet.
func (p *Planner) replaceAlone() (alone, noTable bool) {
	switch {
	case p.table:
		return false, false
	case p.opened:
		return false, true
	}
	return true, false
}

// Suspends reports whether the recovery under way holds every rank
// suspended (policy Rank's full protocol): an agent started again now
// joins the suspension.
func (p *Planner) Suspends() bool {
	return p.cfg.Policy == Rank && p.rc != nil && !p.rc.alone && p.phase == Recovering
}

// rankStarted takes a rank's new incarnation running: in a recovery that
// starts ranks alone, it is the rank's recovery's end.
func (p *Planner) rankStarted(ev RankStarted) []Action {
	rc := p.rc
	if rc == nil || !rc.alone || p.phase != Recovering || ev.Rank < 0 || ev.Rank >= len(p.ranks) {
		return nil
	}
	rs := &p.ranks[ev.Rank]
	if ev.Incarnation != rs.inc || rs.st != rRespawning {
		return nil // an older incarnation, or heard already
	}
	rs.st = rRunning
	if rc.stage == StageRespawn && rc.committed && !p.any(rFailed, rRespawning) {
		return p.aloneOver()
	}
	return nil
}

// aloneOver ends a recovery that started ranks again alone: every one
// runs.
func (p *Planner) aloneOver() []Action {
	ranks := slices.Clone(p.alone)
	slices.Sort(ranks)
	p.alone = nil
	p.phase, p.rc = Running, nil
	over := AloneOver{Epoch: p.epoch, Ranks: ranks, Recovered: p.settleOwed()}
	over.Record = p.Settled()
	return []Action{over}
}

// ProtocolOpened: a rank opened ftlaunch's rank protocol (the client
// library's Init), told under policy Rank.
type ProtocolOpened struct {
	Rank int
	Node string
}

// RankStarted: an incarnation of a rank started (its agent says so).
// Fresh: the root had not heard of it (a report repeated after a failover
// is not).
type RankStarted struct {
	Rank        int
	Incarnation uint64
	Fresh       bool
}

func (ProtocolOpened) isEvent() {}
func (RankStarted) isEvent()    {}

// AloneOver: a recovery that started ranks again alone is over: Ranks run as
// their new incarnation, and the job goes on. (The full protocol's end is
// every agent's acknowledgement of the resume or the restart, which the
// root counts.)
type AloneOver struct {
	Epoch uint64
	Ranks []int
	// Recovered are the ranks started again (the ledger's, ledger.go),
	// for the record.
	Recovered []RankInc
	// Record is the recovery's record once over (Settled), for the state
	// log.
	Record Checkpoint
}

func (AloneOver) isAction() {}
