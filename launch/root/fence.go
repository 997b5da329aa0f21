package root

// Fencing from outside (docs/recovery.md, "Fencing"): an agent the root
// declared lost may still be there, stopped (SIGSTOP) or cut off, and its
// ranks run in sessions of their own; a stopped agent cannot kill them. So
// the root starts a session of its own on the node with the spawner that
// started the agent, and kills there what the lost incarnation started
// (ftlaunch agent --fence: launch/fence). An agent that can read again
// learns it was declared lost as well (MFenced, the answer to its request
// for adoption) and kills its ranks itself. The job's end waits for the fences
// under way, each bounded by launcher.FenceTimeout.

import (
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceNode carries out the planner's Fence of agent idx's incarnations up
// to inc on node (recovery/fence.go says when a fence is confirmed and
// what counts for one that does not reach its node): the fence runs in
// the background, its record goes to the state log, and the planner hears
// its confirmation (FenceDone), before which no rank of the agent's starts
// again.
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

// awaitSelfFence carries out the planner's AwaitSelfFence: once act.At
// passed, if the fence has not reached its node (or failed without
// reaching it), the planner hears it (SelfFenceDue) and takes the fence
// for the node's own.
func (fe *frontend) awaitSelfFence(act recovery.AwaitSelfFence) {
	fe.fences.AwaitSelf(fe.ctx, act.Node, act.Incarnation, act.At, func() {
		fe.post(recovery.SelfFenceDue{Agent: act.Agent, Node: act.Node, Incarnation: act.Incarnation})
	})
}

// selfFence is the self-fence bounds of this job's heartbeat.
func (fe *frontend) selfFence() recovery.SelfFence {
	return recovery.SelfFence{Ping: proto.UplinkPing(fe.opts.Heartbeat), Confirm: fe.opts.Timing.ConfirmQuiet()}
}
