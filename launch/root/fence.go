package root

// Fencing from outside (docs/recovery.md, "Fencing"): a lost agent may be
// stopped or cut off, unable to kill its ranks, so the root kills what it
// started through a session of its own on the node (launch/fence). The
// job's end waits for the fences under way (launcher.FenceTimeout each).

import (
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceNode fences agent idx's incarnations up to inc on node in the
// background: the state log records it, and no rank of the agent's starts
// again before the planner hears its confirmation (FenceDone).
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

// selfFence is the self-fence bounds of this job's heartbeat.
func (fe *frontend) selfFence() recovery.SelfFence {
	return recovery.SelfFence{Ping: proto.UplinkPing(fe.opts.Heartbeat), Confirm: fe.opts.Timing.ConfirmQuiet()}
}
