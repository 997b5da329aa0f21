package journal

import (
	"fmt"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// RecoveryPhase is a phase of the restart protocol that the root commits before
// it sends the phase's commands.
type RecoveryPhase struct {
	Epoch  uint64
	Stage  string             // suspend, respawn, patch, resume, restart-job
	Record raftstore.Recovery // where the recovery stands, for a successor
	Detail string             // what the phase is about, for the event log
	// Rank is the rank the phase is about when it is one (raftstore.NoRank
	// otherwise).
	Rank int
	// Rows are ranks whose row changes with the phase: a patch's new
	// I-tuples, with their incarnation.
	Rows []PatchRow
	// Recovered are ranks whose failure the phase closes (resume: the
	// ranks patched; restart-job: the ranks whose failure restarted the
	// job), with their new incarnation.
	Recovered []PatchRow
}

// PatchRow is one rank's new row.
type PatchRow struct {
	Rank        int
	Incarnation uint64
	ITuple      []byte
}

// Commit records a phase of a recovery and flushes it at once. done, if
// not nil, receives the outcome once the phase is committed (nil), or the
// error that kept it from being committed; it must have room for one
// value.
func (j *Journal) Commit(p RecoveryPhase, done chan error) {
	rec := record{phase: &p, sync: done}
	if !j.push(rec) && done != nil {
		err := j.Err()
		if err == nil {
			err = fmt.Errorf("journal: commit of the %s phase after close", p.Stage)
		}
		done <- err
	}
}

// RanksRestarted records ranks started again (a respawn, or a restarted
// job) as incs[i], with their pids.
func (j *Journal) RanksRestarted(node string, ranks, pids []int, incs []uint64) {
	j.push(record{started: &started{node: node, ranks: ranks, pids: pids, incs: incs}})
}

func (w *writer) absorbPhase(at time.Time, p *RecoveryPhase) {
	if p.Stage != "" && p.Stage == w.j.cfg.LoseLeadAt && !w.lostLead {
		w.loseLead, w.lostLead = true, true
	}
	for _, pr := range p.Rows {
		if !w.checkRank(pr.Rank, "patch") {
			return
		}
		row := &w.rows[pr.Rank]
		if pr.Incarnation >= row.Incarnation {
			row.Incarnation, row.ITuple = pr.Incarnation, pr.ITuple
			if row.State != raftstore.RankRunning {
				row.State, row.ExitCode = raftstore.RankRunning, 0
			}
			w.touch(pr.Rank)
		}
	}
	rank := p.Rank
	if rank < 0 {
		rank = raftstore.NoRank
	}
	// The epoch the state is expected at is the writer's when it flushes.
	rec := p.Record
	rec.Epoch = p.Epoch
	w.recovery = &raftstore.SetRecovery{Recovery: rec}
	w.event(raftstore.Event{Time: at, Kind: raftstore.EventRecovery, Rank: rank,
		Detail: fmt.Sprintf("%s: epoch %d%s", p.Stage, p.Epoch, prefixed(p.Detail))})
	for _, pr := range p.Recovered {
		if !w.checkRank(pr.Rank, "recovered") {
			return
		}
		subj := raftstore.Subject{Rank: pr.Rank}
		if _, ok := w.open[subj]; !ok {
			continue
		}
		delete(w.open, subj)
		w.event(raftstore.Event{Time: at, Kind: raftstore.EventRecovered, Node: w.rows[pr.Rank].Node, Rank: pr.Rank,
			Incarnation: pr.Incarnation, Detail: fmt.Sprintf("%s: rank %d runs as incarnation %d", p.Stage, pr.Rank, pr.Incarnation)})
	}
	w.urgent = true
}

func prefixed(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return ""
	}
	return "; " + s
}
