package recovery

import "github.com/ftlaunch/ftlaunch/launch/journal"

// Live fills the planner's share of the live report: the agents up now,
// whether every standby link is held, the ranks running (started, not
// ended: a rank that never started ends too) and ended, the failure that
// ends the job, whether this root took over, and the recovery under way
// (its stage and epoch; the ranks it starts again, unless it restarts
// every rank). The root adds its own (its job, its node, the times).
func (l Ledger) Live(live *journal.Live) {
	p := l.p
	links := p.Links()
	if n, missing := links.Standbys(); n > 0 && len(missing) == 0 {
		live.BackupsUp = true
	}
	live.AgentsUp, live.Ended, live.Failover = links.UpNow(), l.EndedCount(), p.cfg.Resumed
	for r := range p.led.ranks {
		if l.Started(r) && !l.Ended(r) {
			live.Running++
		}
	}
	if p.failure != nil {
		live.Failure = p.failure.Why.Words()
	}
	st := p.Stage()
	if st == 0 {
		return
	}
	live.Recovery = &journal.LiveRecovery{Stage: st.String(), Epoch: p.epoch}
	if st != StageRestartJob {
		for r := range p.led.ranks {
			if l.InRecovery(r) {
				live.Recovery.Ranks = append(live.Recovery.Ranks, r)
			}
		}
	}
}
