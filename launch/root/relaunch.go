package root

// The root's side of a lost agent started again (docs/recovery.md,
// "Losing an agent"): the planner decides (recovery/relaunch.go); the root
// starts the agent with the spawner that started the first one, gives it
// fresh credentials and the node's share of the job with the recovery's
// state, and tells the planner once it is up. The new incarnation gets a
// new handle: whatever still names the old one (its link's reader, output
// waiting to be acknowledged) is stale, and is dropped or goes nowhere.

import (
	"cmp"
	"errors"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// evRelaunched: the start of a lost agent's next incarnation (up, or
// failed).
type evRelaunched struct {
	res launcher.LaunchResult
	inc uint64
}

func (evRelaunched) isRootEvent() {}

// relaunchAgent carries out the planner's Relaunch: agent act.Agent starts
// again on its node as incarnation act.Incarnation.
func (fe *frontend) relaunchAgent(act recovery.Relaunch) {
	old := fe.agents[act.Agent]
	// Its link is this root's own, as an adopted agent's is (the planner's:
	// a successor does not wait for it to ask for adoption).
	a := &agentHandle{idx: old.idx, name: cmp.Or(act.Node, old.name), ranks: old.ranks, inc: act.Incarnation}
	if fe.replicaNodes[a.idx] && a.name != old.name {
		a.replaces = cmp.Or(old.replaces, old.name) // its voter, if it never joined in its place
	}
	fe.agents[act.Agent] = a
	if old.local != nil {
		fe.goFunc(old.end().Wait) // killed when it was lost: reaped (a session is, by its launcher)
	}
	if old.sess != nil {
		// Its session ends for good: an agent that went silent (stopped,
		// say) never reads that its session closed, so a session that can
		// be killed is (a test node's process: its ranks die with it).
		launcher.KillSession(old.sess)
	}
	if fe.stdinAgent == old {
		fe.stdinAgent = a // stdin is not forwarded to a rank started again
	}
	if !fe.tree { // the job's one agent, on this machine on a socket pair: started again the same way
		if err := fe.startLocal(a); err != nil {
			fe.post(recovery.RelaunchFailed{Agent: a.idx, Incarnation: a.inc, Msg: err.Error()})
			return
		}
		fe.post(recovery.Relaunched{Agent: a.idx, Incarnation: a.inc})
		fe.observe(AgentRelaunched{Agent: a.idx, Node: a.name, Inc: a.inc})
		return
	}
	cs, err := fe.childSpecs([]int{a.idx}) // fresh credentials
	if err == nil && fe.relaunch == nil {
		err = errors.New("this root has no way to start agents")
	}
	if err == nil {
		cs[0].Inc = a.inc
		inc := a.inc
		err = fe.relaunch(cs, func(res launcher.LaunchResult) {
			if !fe.put(evRelaunched{res: res, inc: inc}) && res.Sess != nil {
				_ = res.Sess.Close()
			}
		})
	}
	if err != nil {
		fe.post(recovery.RelaunchFailed{Agent: a.idx, Incarnation: a.inc, Msg: err.Error()})
	}
}

// relaunched takes the start of a lost agent's next incarnation: it gets
// its share of the job and the planner hears that it is up.
func (fe *frontend) relaunched(ev evRelaunched) {
	r := ev.res
	a := fe.agents[r.Child.Idx]
	if l := fe.link(a); a.inc != ev.inc || l.Up || l.Closed {
		// Superseded (the job ended, or a newer incarnation was decided).
		if r.Link != nil {
			r.Link.Conn.Close()
		}
		if r.Sess != nil {
			launcher.KillSession(r.Sess)
		}
		return
	}
	if r.Err != nil {
		fe.step(recovery.RelaunchFailed{Agent: a.idx, Incarnation: a.inc, Msg: r.Err.Error()})
		return
	}
	a.link, a.sess = r.Link, r.Sess
	fe.startReader(a)
	fe.agentUp(a, r.Up)
	if l := fe.link(a); l.Up && !l.Closed && !fe.status().Ending() {
		fe.step(recovery.Relaunched{Agent: a.idx, Incarnation: a.inc})
		fe.observe(AgentRelaunched{Agent: a.idx, Node: a.name, Inc: a.inc})
	}
}

// post hands the planner an event from the event loop's next turn, not
// from inside the actions of the step under way.
func (fe *frontend) post(ev recovery.Event) {
	fe.goFunc(func() { fe.put(evPlanner{ev: ev}) })
}

// evPlanner: an event for the planner, posted by the root itself.
type evPlanner struct{ ev recovery.Event }

func (evPlanner) isRootEvent() {}
