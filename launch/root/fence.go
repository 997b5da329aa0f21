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
)

// fenceFunc kills, on node, what the agent incarnations up to upTo of the
// job left there; it reports what it did.
type fenceFunc func(ctx context.Context, node string, upTo uint64) (string, error)

// fenceAgent fences a lost agent's node from outside, in the background.
func (fe *frontend) fenceAgent(a *agentHandle) {
	if fe.fence == nil || a.local != nil {
		return // the job's one local agent was killed directly
	}
	if fe.breakAt == "no-fence" {
		fe.warnf("test hook: node %s is not fenced from outside (%s)", a.name, breakEnv)
		return
	}
	node, inc := a.name, max(a.inc, 1)
	done := make(chan struct{})
	fe.fencing = append(fe.fencing, done)
	fe.goFunc(func() {
		defer close(done)
		began := time.Now()
		msg, err := fe.fence(fe.ctx, node, inc)
		if err != nil {
			fe.warnf("%v; the agent kills its ranks itself if it hears from the root again", err)
			return
		}
		fe.verbosef("fenced node %s (incarnation %d) in %v: %s", node, inc, time.Since(began).Round(time.Millisecond), msg)
	})
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
