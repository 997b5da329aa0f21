package recovery

import (
	"fmt"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// The records of a recovery's phases as the state log takes them
// (journal.RecoveryPhase): where the recovery stands (its checkpoint),
// what each phase is about in the event log's words, the node table's
// new rows and the ranks it closes. The root commits them as they are.

// Failure is the record r appends to the state log (its rank NoRank, the
// state log's raftstore.NoRank, when it is about no one rank), and, for a
// stranded collective, the record of that collective too (nil: none).
func (r Record) Failure() (journal.Failure, *journal.Stranded) {
	f := journal.Failure{Node: r.Node, Rank: r.Rank, Message: r.Why.Words()}
	if w := r.Why; w.Kind == ReasonStranded {
		return f, &journal.Stranded{Node: w.Node, Rank: NoRank, Seq: w.Seq & (1<<32 - 1), Epoch: w.Seq >> 32, Op: w.Op}
	}
	return f, nil
}

// Phase is the record of the phase c commits.
func (c Commit) Phase() journal.RecoveryPhase {
	rec := c.Rec
	ph := journal.RecoveryPhase{Epoch: rec.Epoch, Stage: rec.Stage.String(), Record: rec.Record(), Rank: NoRank}
	var ranks []int
	for _, rr := range rec.Ranks {
		ranks = append(ranks, rr.Rank)
		if rec.Stage == StagePatch && rr.Addr != nil {
			ph.Rows = append(ph.Rows, journal.PatchRow{Rank: rr.Rank, Incarnation: rr.Incarnation, ITuple: rr.Addr})
		}
	}
	if len(ranks) == 1 {
		ph.Rank = ranks[0]
	}
	switch rec.Stage {
	case StageSuspend, StageRespawn:
		ph.Detail = "rank(s) " + RanksText(ranks)
	case StagePatch:
		ph.Detail = fmt.Sprintf("node table version %d: rank(s) %s", rec.Version, RanksText(ranks))
	case StageResume:
		ph.Recovered = recoveredRows(c.Recovered)
	case StageRelaunch:
		var ds []string
		for _, ar := range rec.Agents {
			if inc := ar.Incarnation; !ar.Up {
				if ar.Lost {
					inc++
				}
				ds = append(ds, fmt.Sprintf("the agent of node %s as incarnation %d", ar.Node, inc))
			}
		}
		ph.Detail = strings.Join(ds, ", ")
		if len(ranks) > 0 {
			ph.Detail += "; rank(s) " + RanksText(ranks)
		}
	case StageRestartJob:
		ph.Detail = fmt.Sprintf("restart %d of the job", rec.Restarts)
		ph.Recovered = recoveredRows(c.Recovered)
	}
	if rec.Stage == StageRespawn || rec.Stage == StageRestartJob {
		ph.Detail += fencedText(rec.Agents)
	}
	return ph
}

// Phase is the record that the recovery is over, after it began (after
// since its failure): it keeps what a successor must know of it, the
// agents started again, on which node, as which incarnation (without them
// it would refuse their adoption).
func (o RecoveryOver) Phase(after time.Duration) journal.RecoveryPhase {
	stage, logged := "resumed", "every rank goes on"
	if o.Stage == StageRestartJob {
		stage, logged = "restarted", "every rank started again"
	}
	return journal.RecoveryPhase{Epoch: o.Epoch, Stage: stage, Rank: NoRank, Record: o.Record.Record(),
		Detail: fmt.Sprintf("%s, %.0f ms after the failure", logged, ms(after))}
}

// Phase is the record that ranks started again alone are running, after
// since the failure.
func (o AloneOver) Phase(after time.Duration) journal.RecoveryPhase {
	ph := journal.RecoveryPhase{Epoch: o.Epoch, Stage: "resumed", Rank: NoRank, Record: o.Record.Record(),
		Detail: fmt.Sprintf("rank(s) %s started again alone, %.0f ms after the failure", RanksText(o.Ranks), ms(after))}
	ph.Recovered = recoveredRows(o.Recovered)
	if len(o.Ranks) == 1 {
		ph.Rank = o.Ranks[0]
	}
	return ph
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// RanksText lists ranks as the records say them: "1 2 5".
func RanksText(ranks []int) string {
	s := fmt.Sprint(ranks)
	return s[1 : len(s)-1]
}

// recoveredRows are the ranks a recovery started again, as its record
// names them.
func recoveredRows(rs []RankInc) []journal.PatchRow {
	var rows []journal.PatchRow
	for _, ri := range rs {
		rows = append(rows, journal.PatchRow{Rank: ri.Rank, Incarnation: ri.Incarnation})
	}
	return rows
}

// fencedText names, for the record of a stage that starts ranks, how the
// fence of each agent incarnation it replaces was confirmed
// ("; fenced: node5 self-fenced, node2 fenced"; journal.RecoveryStep's
// Fenced reads it back): whether the ranks waited for a fence that
// reached the node or for the node's self-fence bound.
func fencedText(agents []AgentRecord) string {
	var ds []string
	for _, ar := range agents {
		for _, f := range ar.Fenced {
			if f.Incarnation+1 == ar.Incarnation {
				ds = append(ds, f.Node+" "+string(f.How))
			}
		}
	}
	if len(ds) == 0 {
		return ""
	}
	return "; " + journal.FencedPrefix + strings.Join(ds, ", ")
}
