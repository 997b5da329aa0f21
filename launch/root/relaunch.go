package root

// The root's side of a lost agent started again (docs/recovery.md): the root
// starts it as the planner decides, with fresh credentials, and tells the
// planner once it is up. A new handle: whatever names the old one is stale.

import (
	"cmp"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// evRelaunched: a lost agent's next incarnation (res.Child.Inc) up, or failed.
type evRelaunched struct{ res launcher.LaunchResult }

func (evRelaunched) isRootEvent() {}

// relaunchAgent carries out the planner's Relaunch: the agent's next incarnation.
func (fe *frontend) relaunchAgent(act recovery.Relaunch) {
	old := fe.agents[act.Agent]
	a := &agentHandle{idx: old.idx, name: cmp.Or(act.Node, old.name), ranks: old.ranks, inc: act.Incarnation}
	if fe.replicaNodes[a.idx] && a.name != old.name {
		a.replaces = cmp.Or(old.replaces, old.name) // its voter, if it never joined in its place
	}
	fe.agents[act.Agent] = a
	old.end().Retire(fe.goFunc)
	if fe.stdinAgent == old {
		fe.stdinAgent = a // stdin is not forwarded to a rank started again
	}
	var err error
	if !fe.tree { // the job's one agent, on this machine: on a socket pair again
		if err = fe.startLocal(a); err == nil {
			fe.post(recovery.Relaunched{Agent: a.idx, Incarnation: a.inc})
			fe.observe(AgentRelaunched{Agent: a.idx, Node: a.name, Inc: a.inc})
		}
	} else {
		var cs []proto.ChildSpec // fresh credentials
		if cs, err = launcher.ChildSpecs(fe.ca, fe.topo, fe.nameOf, []int{a.idx}); err == nil {
			cs[0].Inc = act.Incarnation
			err = fe.relaunch(cs, func(res launcher.LaunchResult) {
				if !fe.put(evRelaunched{res}) && res.Sess != nil {
					_ = res.Sess.Close()
				}
			})
		}
	}
	if err != nil {
		fe.post(recovery.RelaunchFailed{Agent: a.idx, Incarnation: a.inc, Msg: err.Error()})
	}
}

// relaunched takes a lost agent's next incarnation's start: up, it gets its share.
func (fe *frontend) relaunched(ev evRelaunched) {
	r := ev.res
	a := fe.agents[r.Child.Idx]
	if l := fe.link(a); a.inc != r.Child.Inc || l.Up || l.Closed {
		r.Discard() // superseded
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
