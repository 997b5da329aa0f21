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
	"context"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// fenceFunc kills, on node, what the agent incarnations up to upTo of the
// job left there; it reports what it did.
type fenceFunc func(ctx context.Context, node string, upTo uint64) (string, error)

// fenceAgent carries out the planner's fence of an agent it declared
// lost: its node is fenced from outside, in the background, and the
// planner hears it (fenceDone): no rank of the agent's starts again
// before.
func (fe *frontend) fenceAgent(act recovery.Fence) {
	node, inc := act.Node, act.Incarnation
	if fe.agents[act.Agent].local != nil {
		// The job's one local agent was killed directly (and its ranks,
		// abandonRanks): nothing of it runs on.
		fe.fenceDone(act.Agent, node, inc)
		return
	}
	fe.fenceNode(act.Agent, node, inc)
}

// fenceNode fences incarnations up to inc of agent idx on node, in the
// background, and then confirms it (fenceDone). A new leader's planner asks
// for it (recovery.Fence) for the fences its predecessor did not see
// confirmed.
func (fe *frontend) fenceNode(idx int, node string, inc uint64) {
	if fe.fence == nil {
		fe.fenceDone(idx, node, inc) // no way to reach nodes (an in-process job)
		return
	}
	if fe.hooks.breakAt == "no-fence" {
		fe.warnf("test hook: node %s is not fenced from outside (%s)", node, breakEnv)
		fe.fenceDone(idx, node, inc)
		return
	}
	done := make(chan struct{})
	fe.fencing = append(fe.fencing, done)
	fe.goFunc(func() {
		defer close(done)
		began := time.Now()
		msg, err := fe.fence(fe.ctx, node, inc)
		rec := journal.Fence{Node: node, Incarnation: inc, Took: time.Since(began), Result: msg}
		if err != nil {
			rec.Err = err.Error()
			fe.warnf("%v; the agent kills its ranks itself if it hears from the root again", err)
		} else {
			fe.verbosef("fenced node %s (incarnation %d) in %v: %s", node, inc, time.Since(began).Round(time.Millisecond), msg)
		}
		if fe.journal != nil {
			fe.journal.Fenced(rec) // the timeline shows it
		}
		fe.fenceDone(idx, node, inc)
	})
}

// fenceDone confirms a fence to the planner, which starts no rank again
// before (recovery.FenceDone). A fence is confirmed once it ended what the
// lost incarnation left on the node (it returns once that ended), or once
// it failed: a node that does not answer its spawner within
// launcher.FenceTimeout (crashed, cut off) is taken as holding nothing
// that runs on — what a cut-off agent does about its own ranks is its
// own (docs/recovery.md, "Fencing"). The wait for a node that does not
// answer is that bound (or the spawner's own, an SSH ConnectTimeout).
func (fe *frontend) fenceDone(idx int, node string, inc uint64) {
	fe.post(recovery.FenceDone{Agent: idx, Node: node, Incarnation: inc})
}

// awaitFences waits for the fences under way (each ends within its bound).
func (fe *frontend) awaitFences() {
	for _, done := range fe.fencing {
		<-done
	}
	fe.fencing = nil
}

// declaredLost reports whether incarnation inc of agent a was declared
// lost: a newer one was decided, or this one is being replaced, or its
// link ended before the agent finished.
func (fe *frontend) declaredLost(a *agentHandle, inc uint64) bool {
	return inc < a.inc || inc == a.inc && (fe.rec.Relaunching(a.idx) || a.closed && !a.done)
}
