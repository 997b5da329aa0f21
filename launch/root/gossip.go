package root

// Gossip (docs/membership.md): with a launch tree, the front-end and every
// agent join the job's memberlist cluster, which agrees on a death in 1-2 s
// where the tree's heartbeat takes 5 s. Its "dead" is evidence: the planner
// weighs it against the link's silence (recovery/detect.go).

import (
	"context"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/membership"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// evGossip: evidence from the front-end's member.
type evGossip struct{ ev membership.Evidence }

func (evGossip) isRootEvent() {}

// evGossipCheck: look again at agent a, declared dead while its link spoke.
type evGossipCheck struct{ a *agentHandle }

func (evGossipCheck) isRootEvent() {}

// startGossip starts the front-end's member and passes its evidence to the
// event loop; without one the tree's heartbeats alone detect failures.
func (fe *frontend) startGossip(ctx context.Context) {
	m, spec, err := fe.opts.Agents.StartGossip(ctx, fe.jobID, fe.opts.Timing.FastGossip)
	if err != nil {
		fe.warnf("gossip: %v; failures are detected by the tree's heartbeats alone", err)
		return
	}
	fe.gossip, fe.tmpl.Gossip = m, spec
	fe.goFunc(func() { fe.forwardGossip(ctx, m.Events()) })
	fe.awake = proto.NewAwake(proto.AwakeTick)
	fe.goFunc(func() { fe.awake.Run(ctx) })
}

// forwardGossip passes evidence to the event loop until ctx ends or the
// member stops (the front-end's, or a successor's replica agent's).
func (fe *frontend) forwardGossip(ctx context.Context, events <-chan membership.Evidence) {
	launcher.ForwardGossip(ctx, events, func(ev membership.Evidence) bool { return fe.put(evGossip{ev: ev}) })
}

// stopGossip shuts the front-end's member down (forwardGossip ends too).
func (fe *frontend) stopGossip() {
	if fe.gossip != nil {
		_ = fe.gossip.Shutdown()
	}
}

// gossiped takes gossip's evidence of a death to the planner.
func (fe *frontend) gossiped(ev membership.Evidence) {
	if ev.Kind != membership.KindDead {
		return
	}
	for _, a := range fe.agents {
		if a.name == ev.Node {
			fe.verbosef("gossip: node %s is dead (observed by %s)", a.name, ev.Observer)
			fe.step(fe.gossipDead(a, ev.Incarnation, false))
			return
		}
	}
}

// gossipDead is gossip's word on agent a with the root's facts on its
// link's I/O.
func (fe *frontend) gossipDead(a *agentHandle, inc uint64, again bool) recovery.GossipDead {
	ev := recovery.GossipDead{Agent: a.idx, Incarnation: inc, Linked: a.link != nil, Again: again, Since: time.Since(fe.start)}
	if a.link != nil {
		ev.Quiet, ev.Left = a.link.ConfirmSilence(fe.opts.Heartbeat, fe.opts.Timing, fe.awake)
	}
	return ev
}

// gossipAction carries out one of the planner's decisions on gossip's
// word; false for any other action.
func (fe *frontend) gossipAction(act recovery.Action) bool {
	switch act := act.(type) {
	case recovery.Suspect: // its parent confirms it by the link's silence
		_ = fe.agents[act.Parent].send(proto.MSuspect, proto.EncodeInt(int64(act.Agent)))
	case recovery.DeclareLost:
		a := fe.agents[act.Agent]
		if act.Linked {
			a.link.Conn.Close() // its reader ends; its end is ours to report
		}
		fe.linkEnded(a, proto.ErrGossipDead)
	case recovery.CheckAgain:
		fe.after(act.After, evGossipCheck{a: fe.agents[act.Agent]})
	case recovery.KeptAlive: // told (narrate)
	default:
		return false
	}
	return true
}
