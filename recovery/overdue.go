package recovery

import (
	"fmt"
	"strings"
	"time"
)

// A terminate that did not reach some agents (docs/design.md, "Healing
// the tree"): every agent kills its ranks --kill-after after a terminate,
// so ranks that outlive the job's terminate by KillResend more did not
// get it: a broadcast relayed down the tree can be lost on its way (to an
// agent moving to its backup parent, say). Each agent whose ranks have
// not all ended is sent a kill of its own, routed to it, and again every
// KillResend until the job ends: a lost message costs the job seconds,
// not its end. An agent that cannot be reached is the failure detectors'
// (its link's heartbeat, gossip), as at any time.

// KillResend is how long past --kill-after a terminating job's ranks may
// run before their agents are told again to kill them, and then the
// period of the telling.
const KillResend = 5 * time.Second

// TerminateOverdue: --kill-after and KillResend (or KillResend since the
// last one) passed since the job was terminated.
type TerminateOverdue struct{}

// KillOverdue: kill the ranks of Agents, which did not end (Ranks of
// them); look again after KillResend. First: the first time (the user is
// told, with the job's KillAfter).
type KillOverdue struct {
	Agents    []int
	Ranks     int
	First     bool
	KillAfter time.Duration
}

func (TerminateOverdue) isEvent() {}
func (KillOverdue) isAction()     {}

// terminateOverdue decides which agents are told again to kill their
// ranks (none once the job is over or every rank ended).
func (p *Planner) terminateOverdue() []Action {
	if p.phase == Over || p.led.ended >= len(p.led.ranks) {
		return nil
	}
	k := KillOverdue{KillAfter: p.cfg.KillAfter}
	for a, l := range p.links {
		if l.closed || l.done {
			continue
		}
		for r := range p.ranks {
			if p.ranks[r].agent == a && !p.led.ranks[r].ended {
				k.Ranks++
				if !containsInt(k.Agents, a) {
					k.Agents = append(k.Agents, a)
				}
			}
		}
	}
	if len(k.Agents) > 0 && !p.killResent {
		p.killResent, k.First = true, true
	}
	return []Action{k}
}

// words says the first KillOverdue (Narrate).
func (k KillOverdue) words(name func(int) string) string {
	names := make([]string, len(k.Agents))
	for i, a := range k.Agents {
		names[i] = name(a)
	}
	return fmt.Sprintf("%d rank(s) on node(s) %s still running %v after the job was terminated (--kill-after %v): killing them",
		k.Ranks, strings.Join(names, ", "), k.KillAfter+KillResend, k.KillAfter)
}
