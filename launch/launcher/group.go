package launcher

import (
	"io"
	"strings"
	"sync"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// groupShare is one group start's session (a single srun step for every
// agent of a flat start), shared by the agents it started. Each agent
// holds a member of it; ending a member (its agent lost, or the job's
// end) releases that agent's share, and the step itself ends only once
// every share is released. So the loss of one agent's node, or the
// relaunch of one agent elsewhere, ends no other agent: the step was
// started with --no-kill, and a lost task ends only itself (docs/slurm.md).
// A lost agent still running on a node that answers is killed by the
// root's fence, not by ending the step.
type groupShare struct {
	sess spawn.Session

	mu   sync.Mutex
	open int     // shares not released
	end  endMode // the strongest end a released share asked for
}

// endMode is how a share was released, weakest first: the step's end is
// the strongest its shares asked for.
type endMode int

const (
	endFinished endMode = iota // its agent exited: srun ends with its last task
	endClose                   // close the step (stdin, then SIGTERM to srun)
	endKill                    // kill srun: a task on a dead node would keep it waiting for Slurm
)

// newGroupShare shares sess among n agents.
func newGroupShare(sess spawn.Session, n int) *groupShare {
	return &groupShare{sess: sess, open: n}
}

// member returns a share of the group's session for one agent.
func (g *groupShare) member() *groupMember { return &groupMember{g: g} }

// release gives up one share; the last ends the step as the strongest
// release asked: killed, closed, or (every agent finished) left to end
// by itself.
func (g *groupShare) release(m endMode) {
	g.mu.Lock()
	g.open--
	g.end = max(g.end, m)
	last, end := g.open == 0, g.end
	g.mu.Unlock()
	if !last {
		return
	}
	switch end {
	case endKill:
		KillSession(g.sess)
	case endClose:
		_ = g.sess.Close()
	}
}

// groupMember is one agent's share of a group start's session (a
// spawn.Session). Its output is the group's, which the launcher drains;
// Wait waits for the step to end.
type groupMember struct {
	g    *groupShare
	once sync.Once
}

func (m *groupMember) Stdout() io.Reader { return strings.NewReader("") }
func (m *groupMember) Stderr() io.Reader { return strings.NewReader("") }

// Wait waits for the group's step to end (every agent's, or the whole
// step's failure).
func (m *groupMember) Wait() error { return m.g.sess.Wait() }

// Close releases this agent's share; the step is closed with the last.
func (m *groupMember) Close() error {
	m.once.Do(func() { m.g.release(endClose) })
	return nil
}

// Kill releases this agent's share and asks for the step to be killed
// when the last share is released.
func (m *groupMember) Kill() error {
	m.once.Do(func() { m.g.release(endKill) })
	return nil
}

func (m *groupMember) Timings() spawn.Timings { return m.g.sess.Timings() }

// Finished tells a session that its agent exited normally at the job's
// end. A group start's share is released (the step ends with the last
// one, by itself unless another share asked for a close or a kill); any
// other session ends by itself and is left alone.
func Finished(s spawn.Session) {
	if m, ok := s.(*groupMember); ok {
		m.once.Do(func() { m.g.release(endFinished) })
	}
}
