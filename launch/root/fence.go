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
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceAgent carries out the planner's fence of an agent it declared
// lost: its node is fenced from outside, in the background, and the
// planner hears it (fenceDone): no rank of the agent's starts again
// before.
func (fe *frontend) fenceAgent(act recovery.Fence) {
	node, inc := act.Node, act.Incarnation
	if fe.agents[act.Agent].local != nil {
		// The job's one local agent was killed directly (and its ranks,
		// abandonRanks): nothing of it runs on.
		fe.fenceDone(act.Agent, node, inc, recovery.FenceKilled)
		return
	}
	fe.fenceNode(act.Agent, node, inc)
}

// fenceNode fences incarnations up to inc of agent idx on node, in the
// background, and then confirms it (fenceDone). A new leader's planner asks
// for it (recovery.Fence) for the fences its predecessor did not see
// confirmed. The planner decides when a fence that has not reached the node
// (SSH: no connection) counts as the node's own (recovery.FenceBegan →
// AwaitSelfFence: FenceGrace after it began, once the node has been silent
// for the self-fence bound), and the root's timer tells it (awaitSelfFence);
// the fence runs on to its bound all the same, and the job's end waits for
// it.
func (fe *frontend) fenceNode(idx int, node string, inc uint64) {
	if !fe.fences.Reaches() {
		fe.fenceDone(idx, node, inc, recovery.FenceKilled) // no way to reach nodes (an in-process job)
		return
	}
	if fe.hooks.breakAt == "no-fence" {
		fe.warnf("test hook: node %s is not fenced from outside (%s)", node, breakEnv)
		fe.fenceDone(idx, node, inc, recovery.FenceKilled)
		return
	}
	began := fe.fences.Begin(fe.ctx, node, inc, func(rec journal.Fence, reached bool) {
		if rec.Err != "" {
			fe.warnf("%s; the agent kills its ranks itself if it hears from the root again", rec.Err)
		} else {
			fe.verbosef("fenced node %s (incarnation %d) in %v: %s", node, inc, rec.Took.Round(time.Millisecond), rec.Result)
		}
		if fe.journal != nil {
			fe.journal.Fenced(rec) // the timeline shows it
		}
		if reached || rec.Err == "" {
			fe.fenceDone(idx, node, inc, recovery.FenceKilled) // else it never reached the node: selfFenced confirms it
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

// fenceDone confirms a fence to the planner, which starts no rank again
// before (recovery.FenceDone). A fence is confirmed once it ended what the
// lost incarnation left on the node (it returns once that ended), or once
// it failed after it reached the node (launcher.FenceTimeout; a spawner
// that reaches its node or fails at once: test nodes, srun), or, for a
// node it has not reached, at the self-fence bound (selfFenced).
func (fe *frontend) fenceDone(idx int, node string, inc uint64, how recovery.FenceHow) {
	fe.post(recovery.FenceDone{Agent: idx, Node: node, Incarnation: inc, How: how})
}
