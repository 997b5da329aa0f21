package root

// Fencing from outside (docs/recovery.md, "Fencing"): an agent declared lost
// may still be there, stopped or cut off, and cannot kill its ranks. So the
// root kills what the lost incarnation started through a session of its own
// on the node (ftlaunch agent --fence: launch/fence). The job's end waits
// for the fences under way (launcher.FenceTimeout bounds each).

import (
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceNode carries out the planner's Fence of agent idx's incarnations up
// to inc on node in the background: its record goes to the state log, and
// the planner hears its confirmation (FenceDone), before which no rank of
// the agent's starts again (recovery/fence.go).
func (fe *frontend) fenceNode(idx int, node string, inc uint64) {
	done := recovery.FenceDone{Agent: idx, Node: node, Incarnation: inc, How: recovery.FenceKilled}
	if fe.hooks.breakAt == "no-fence" {
		fe.warnf("test hook: node %s is not fenced from outside (%s)", node, breakEnv)
		fe.post(done)
		return
	}
	began := fe.fences.Begin(fe.ctx, node, inc, func(end launcher.FenceEnd) {
		fe.tell(end.Words())
		if fe.journal != nil {
			fe.journal.Fenced(end.Record) // the timeline shows it
		}
		if end.Confirmed {
			fe.post(done)
		}
	})
	fe.step(recovery.FenceBegan{Agent: idx, Node: node, Incarnation: inc, Began: began})
}

// awaitSelfFence tells the planner once act.At passed if the fence has not
// reached its node (SelfFenceDue): it takes the node's own for it.
func (fe *frontend) awaitSelfFence(act recovery.AwaitSelfFence) {
	fe.fences.AwaitSelf(fe.ctx, act.Node, act.Incarnation, act.At, func() {
		fe.post(recovery.SelfFenceDue{Agent: act.Agent, Node: act.Node, Incarnation: act.Incarnation})
	})
}

// selfFence is the self-fence bounds of this job's heartbeat.
func (fe *frontend) selfFence() recovery.SelfFence {
	return recovery.SelfFence{Ping: proto.UplinkPing(fe.opts.Heartbeat), Confirm: fe.opts.Timing.ConfirmQuiet()}
}
