package recovery

import (
	"slices"
)

// The rank ledger: which ranks count as ended, which count as running
// again for a restart that has not started them yet, and which are owed a
// restart, as which incarnation. The root counts the job's end from it
// (every rank ended: the agents are told to exit), and its records name
// the ranks a recovery started again from it. The planner keeps it in
// Step, with the decisions that change it:
//
//   - a rank's end (RankExited) is counted; a rank the planner is
//     starting again (policy Rank: a failed one not respawned yet, or an
//     end of an incarnation older than the one it started; policy Job:
//     every rank whose end is older than the restart) counts as running
//     again ("revived"): its end is not the rank's;
//   - the ranks of an agent that is gone are counted as ended
//     (LoseSubtree.Abandoned), and revived if the agent is started again;
//   - once the job is terminated (Terminate), the ranks revived for a
//     restart that did not start them count as ended again, as they ended
//     before; one that starts after that (RankStarted, Fresh) is running
//     until its end comes;
//   - a new leader's planner revives what the recovery it carries on
//     starts again (Restore).
//
// Owed restarts go out with the actions that close a recovery: a Commit
// of the Resume or RestartJob stage, or AloneOver (Recovered). A record
// names each rank's incarnation once: an end of an incarnation older than
// the rank's current one (told twice, or replaced by a restart of the job)
// counts as nothing, a rank is never owed an incarnation a record named
// already, and a failure that restarts the job is owed before that
// restart's record is made (TestLedgerNamesEachRestartOnce; the seeded
// worlds check it of every record).

// ledgerRank is one rank's line in the ledger.
type ledgerRank struct {
	ended   bool // counted as ended
	revived bool // counted as running again for a restart not started yet
	// endInc is the incarnation whose end was counted (0: not known, as
	// for a rank abandoned with its agent); failed: that end was not
	// clean (a code, a signal or a reason).
	endInc uint64
	failed bool
	// started: it ran (an incarnation was reported running); runs is the
	// incarnation its agent runs, as reported or sent (Respawn), pid its
	// process's id on its node.
	started bool
	runs    uint64
	pid     int
	// last is its last end as the root reported it, or as the planner
	// abandoned it with its agent (LoseSubtree), for the job's summary of
	// failed ranks (Failed); notItsOwn: that end was not a failure of its
	// own (notItsFailure; abandoned while the job ended, or never started).
	last      RankExited
	notItsOwn bool
}

type ledger struct {
	ranks []ledgerRank
	ended int // ranks counted as ended
	// owed are the ranks being started again and not yet named in a
	// record, with their new incarnation; named, by rank, the highest
	// incarnation a record named (it is never owed again).
	owed  map[int]uint64
	named map[int]uint64
	// terminated: the planner told the root to terminate the job.
	terminated bool
}

// RankInc names a rank and one of its incarnations.
type RankInc struct {
	Rank        int
	Incarnation uint64
}

// Ledger is the planner's rank ledger, read-only.
type Ledger struct{ p *Planner }

// Ledger is a read-only view of the rank ledger (ledger.go).
func (p *Planner) Ledger() Ledger { return Ledger{p} }

// Started reports whether rank r ran (an incarnation was reported
// running).
func (l Ledger) Started(r int) bool { return l.p.led.ranks[r].started }

// StartedCount is the number of ranks that ran.
func (l Ledger) StartedCount() int {
	n := 0
	for _, lr := range l.p.led.ranks {
		if lr.started {
			n++
		}
	}
	return n
}

// Runs is the incarnation rank r's agent runs (1: the first), as it
// reported it or was told (Respawn): an end of an older one is stale.
func (l Ledger) Runs(r int) uint64 { return max(l.p.led.ranks[r].runs, 1) }

// Pid is rank r's process id on its node (0: not reported).
func (l Ledger) Pid(r int) int { return l.p.led.ranks[r].pid }

// Pids lists the process ids of ranks (0: not reported).
func (l Ledger) Pids(ranks []int) []int {
	pids := make([]int, len(ranks))
	for i, r := range ranks {
		pids[i] = l.Pid(r)
	}
	return pids
}

// Running lists the process ids of the ranks that have not ended and run
// on an agent on (not known yet: none), for a root that kills what is
// left of the job on its own machine.
func (l Ledger) Running(on func(agent int) bool) []int {
	var pids []int
	for r := range l.p.led.ranks {
		if pid, n := l.Pid(r), l.Agent(r); pid > 0 && !l.Ended(r) && n >= 0 && on(n) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Agent is the agent that runs rank r (-1: not known yet, a successor's
// until the agent reports it).
func (l Ledger) Agent(r int) int { return l.p.ranks[r].agent }

// Ended reports whether rank r counts as ended.
func (l Ledger) Ended(r int) bool {
	return r >= 0 && r < len(l.p.led.ranks) && l.p.led.ranks[r].ended
}

// Failed lists, by rank, the ranks whose last end was a failure of their
// own, for the job's summary (FailedRanks), each on its node now (node).
func (l Ledger) Failed(node func(rank int) string) []RankExited {
	var failed []RankExited
	for r, lr := range l.p.led.ranks {
		if !lr.last.Clean() && !lr.notItsOwn {
			ev := lr.last
			ev.Rank, ev.Node = r, node(r)
			failed = append(failed, ev)
		}
	}
	return failed
}

// EndedCount is the number of ranks that count as ended: the job is over
// once it is the job's size.
func (l Ledger) EndedCount() int { return l.p.led.ended }

// InRecovery reports whether rank r is being started again by the
// recovery under way (false with none under way).
func (l Ledger) InRecovery(r int) bool {
	if l.p.rc == nil {
		return false
	}
	_, owed := l.p.led.owed[r]
	return owed || l.p.Replacing(r)
}

func newLedger(ranks int, ended, failed []int) ledger {
	l := ledger{ranks: make([]ledgerRank, ranks), owed: map[int]uint64{}, named: map[int]uint64{}}
	for _, r := range ended {
		if r >= 0 && r < ranks && !l.ranks[r].ended {
			l.ranks[r].ended = true
			l.ended++
		}
	}
	for _, r := range failed {
		if r >= 0 && r < ranks {
			l.ranks[r].failed = true
		}
	}
	return l
}

// countEnd counts rank r's end (of incarnation inc; failed: not clean).
func (p *Planner) countEnd(r int, inc uint64, failed bool) {
	if r < 0 || r >= len(p.led.ranks) {
		return
	}
	lr := &p.led.ranks[r]
	lr.endInc, lr.failed = inc, failed
	if !lr.ended {
		lr.ended = true
		p.led.ended++
	}
}

// olderEnd reports whether rank r's counted end is of an incarnation older
// than the planner's current one (or of one not known).
func (p *Planner) olderEnd(r int) bool {
	inc := p.led.ranks[r].endInc
	return inc == 0 || inc < p.ranks[r].inc
}

// revive counts an ended rank as running again: the planner starts it
// again. One whose end was a failure is owed a restart, as the
// incarnation the planner starts next.
func (p *Planner) revive(r int) {
	lr := &p.led.ranks[r]
	if !lr.ended {
		return
	}
	if lr.failed {
		inc := p.ranks[r].inc
		if p.ranks[r].st == rFailed {
			inc++ // not respawned yet
		}
		p.owe(r, max(inc, 1))
	}
	lr.ended, lr.revived = false, true
	p.led.ended--
}

// owe owes rank r a restart as incarnation inc, unless it is owed one
// already or a record named inc (or a later one) already.
func (p *Planner) owe(r int, inc uint64) {
	if _, ok := p.led.owed[r]; !ok && inc > p.led.named[r] {
		p.led.owed[r] = inc
	}
}

// reviveStarting revives every rank whose end the recovery under way
// makes stale: under a restart of the job, every end older than it; else
// rank r (NoRank: none) if it is being replaced and its end is the failed
// incarnation's or an older one's.
func (p *Planner) reviveStarting(r int) {
	if p.RestartsJob() {
		for i := range p.ranks {
			if p.olderEnd(i) {
				p.revive(i)
			}
		}
		return
	}
	if p.Replacing(r) && (p.AwaitsRespawn(r) || p.olderEnd(r)) {
		p.revive(r)
	}
}

// reviveRelaunched revives the ranks of agent a if the planner starts it
// again: their end is not the job's.
func (p *Planner) reviveRelaunched(a int) {
	if !p.Relaunching(a) {
		return
	}
	if p.RestartsJob() {
		p.reviveStarting(NoRank)
		return
	}
	for r := range p.ranks {
		if p.ranks[r].agent == a && p.Replacing(r) {
			p.revive(r)
		}
	}
}

// unrevive counts the ranks a restart had not started yet when the job
// began to end as ended again, as they ended before.
func (p *Planner) unrevive() {
	p.led.terminated = true
	for r := range p.led.ranks {
		lr := &p.led.ranks[r]
		if lr.revived && !lr.ended {
			lr.revived, lr.ended = false, true
			p.led.ended++
		}
	}
}

// started takes a rank's new incarnation running (fresh: not heard of
// before): one that starts after the job was terminated is running until
// its end comes.
func (p *Planner) started(ev RankStarted) {
	if !ev.Fresh || ev.Rank < 0 || ev.Rank >= len(p.led.ranks) {
		return
	}
	lr := &p.led.ranks[ev.Rank]
	if lr.ended && !lr.revived && p.led.terminated {
		lr.ended = false
		p.led.ended--
	}
	lr.revived = false
}

// abandon counts the ranks of the agents ls lost (closed, for agents
// never started) that had not ended as ended, with ls's reason, and lists
// them (by agent, in rank order): their end is not their own failure
// while the job ends, nor for agents never started.
func (p *Planner) abandon(ls LoseSubtree) []int {
	agents := ls.Lost
	if ls.NeverStarted != "" {
		agents = ls.Closed
	}
	var gone []int
	for _, a := range agents {
		for r := range p.ranks {
			if p.ranks[r].agent == a && !p.led.ranks[r].ended {
				p.countEnd(r, 0, true)
				gone = append(gone, r)
				p.lastEnd(RankExited{Rank: r, Code: ExitLauncher, Reason: ls.Reason()}, ls.Ending || ls.NeverStarted != "")
			}
		}
	}
	return gone
}

// lastEnd notes ev as rank ev.Rank's last end (notItsOwn: not a failure
// of its own).
func (p *Planner) lastEnd(ev RankExited, notItsOwn bool) {
	if ev.Rank >= 0 && ev.Rank < len(p.led.ranks) {
		p.led.ranks[ev.Rank].last, p.led.ranks[ev.Rank].notItsOwn = ev, notItsOwn
	}
}

// settleOwed hands out the ranks owed a restart, in rank order, and
// forgets them: the record being made names them.
func (p *Planner) settleOwed() []RankInc {
	if len(p.led.owed) == 0 {
		return nil
	}
	out := make([]RankInc, 0, len(p.led.owed))
	for r, inc := range p.led.owed {
		out = append(out, RankInc{Rank: r, Incarnation: inc})
		p.led.named[r] = max(p.led.named[r], inc)
	}
	slices.SortFunc(out, func(a, b RankInc) int { return a.Rank - b.Rank })
	clear(p.led.owed)
	return out
}

// commit is the Commit of the recovery in progress; the one of a stage
// that ends a recovery (Resume, RestartJob) names the ranks it started
// again.
func (p *Planner) commit() Commit {
	c := Commit{Rec: p.checkpoint()}
	if s := p.rc.stage; s == StageResume || s == StageRestartJob {
		c.Recovered = p.settleOwed()
	}
	return c
}

// RanksStarted: agent Agent says ranks Ranks run, as processes Pids and
// incarnations Incs (nil: the first): a first start, a start heard again
// (a successor hears of every rank again), or an incarnation started
// again (a respawn, a restart of the job).
type RanksStarted struct {
	Agent int
	Ranks []int
	Pids  []int
	Incs  []uint64
}

// RanksRunning: ranks of Agent run now, for the state log and the user:
// Again, started again as Incs (a respawn, a restart of the job, or a
// successor hearing of one); else started for the first time. Pids are
// their processes.
type RanksRunning struct {
	Agent int
	Ranks []int
	Pids  []int
	Incs  []uint64
	Again bool
}

func (RanksStarted) isEvent()  {}
func (RanksRunning) isAction() {}

// ranksStarted takes ranks that run: which were started again, which for
// the first time, and which were heard of before; a rank started again
// alone ends its recovery (RankStarted, said again for a respawn sent
// twice).
func (p *Planner) ranksStarted(ev RanksStarted) []Action {
	again := RanksRunning{Agent: ev.Agent, Again: true}
	fresh := RanksRunning{Agent: ev.Agent}
	var starts []Event
	for i, r := range ev.Ranks {
		if r < 0 || r >= len(p.led.ranks) || i >= len(ev.Pids) {
			continue
		}
		lr := &p.led.ranks[r]
		if p.ranks[r].agent < 0 {
			p.ranks[r].agent = ev.Agent // a successor learns where it runs
		}
		if ev.Incs != nil && ev.Incs[i] > 1 {
			inc := ev.Incs[i]
			anew := inc > lr.runs || lr.pid != ev.Pids[i]
			if anew {
				lr.runs, lr.pid, lr.started = inc, ev.Pids[i], true
				again.Ranks, again.Pids, again.Incs = append(again.Ranks, r), append(again.Pids, ev.Pids[i]), append(again.Incs, inc)
			}
			starts = append(starts, RankStarted{Rank: r, Incarnation: inc, Fresh: anew})
			continue
		}
		lr.pid = ev.Pids[i]
		if !lr.started {
			lr.started = true
			fresh.Ranks, fresh.Pids = append(fresh.Ranks, r), append(fresh.Pids, ev.Pids[i])
		}
	}
	var acts []Action
	if len(again.Ranks) > 0 {
		acts = append(acts, again)
	}
	for _, st := range starts {
		acts = append(acts, p.Step(st)...)
	}
	if len(fresh.Ranks) > 0 {
		acts = append(acts, fresh)
	}
	return acts
}
