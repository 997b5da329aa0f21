package launcher

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// SocketPair returns a connected pair of Unix stream sockets: ours as a
// net.Conn, the other end as a file for a child process.
func SocketPair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "socketpair")
	theirs := os.NewFile(uintptr(fds[1]), "socketpair-child")
	conn, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return conn, theirs, nil
}

// KillSession ends a session at once where the mechanism allows (srun:
// SIGKILL to srun), else closes it. An SSH session is closed: its Kill asks
// the server, which on a dead connection waits for TCP's timeout.
func KillSession(s spawn.Session) {
	if k, ok := s.(interface{ Kill() error }); ok && !isSSH(s) {
		_ = k.Kill()
		return
	}
	_ = s.Close()
}

// isSSH reports an SSH session: its Kill asks the server, which on a dead
// connection waits for TCP's timeout.
func isSSH(s spawn.Session) bool {
	_, ok := s.(sshSession)
	return ok
}

// AgentEnd is an agent's process or session at the job's end, as its
// root waits for it (ReapAgents).
type AgentEnd struct {
	Finished bool          // its link ended after it said it was done
	Local    *LocalAgent   // the agent on the root's machine (nil: none)
	Sess     spawn.Session // the session the root started it in (nil: none)
}

// ReapAgents waits for the agents' processes and sessions once every
// agent's link ended. Sessions of agents that finished end at once. A
// lost agent's may not: srun cancelling a step on a dead node can take
// tens of seconds. Those get lost to end; then the ones still running are
// killed (KillSession: srun gets SIGKILL, an SSH connection is closed)
// and get lost again. It returns once every wait it began returned, but
// for a session that outlives its kill (its Wait cannot be ended), whose
// wait is left to this process's exit.
func ReapAgents(agents []AgentEnd, lost time.Duration) {
	for _, a := range agents {
		if a.Finished && a.Sess != nil {
			// One srun step shared by every agent (a group start) ends
			// once each has released its share, so all are released
			// before any is waited for; a step with a task on a lost node
			// is killed then (its cancellation would wait for Slurm:
			// group.go). Other sessions end by themselves.
			Finished(a.Sess)
		}
	}
	var waits []lostWait
	for _, a := range agents {
		if !a.Finished && a.Local == nil && a.Sess != nil {
			w := lostWait{sess: a.Sess, ended: make(chan struct{})}
			go func() { // joined by awaitEnds, unless the session outlives its kill
				defer close(w.ended)
				_ = w.sess.Wait()
			}()
			waits = append(waits, w)
		}
	}
	for _, a := range agents {
		if a.Finished || a.Local != nil {
			a.Wait()
		}
	}
	if awaitEnds(waits, time.Now().Add(lost)) {
		return
	}
	for _, w := range waits {
		select {
		case <-w.ended:
		default:
			KillSession(w.sess)
		}
	}
	awaitEnds(waits, time.Now().Add(lost))
}

// lostWait is ReapAgents's wait for a lost agent's session: ended is
// closed once its Wait returned.
type lostWait struct {
	sess  spawn.Session
	ended chan struct{}
}

// awaitEnds waits until every one of waits ended, or deadline; it
// reports whether all did.
func awaitEnds(waits []lostWait, deadline time.Time) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for _, w := range waits {
		select {
		case <-w.ended:
		case <-t.C:
			return false
		}
	}
	return true
}

// Kill ends the agent: a local one is killed, a remote one's session is
// closed (the agent sees its link end and kills its ranks).
func (a AgentEnd) Kill() {
	switch {
	case a.Local != nil:
		a.Local.Kill()
	case a.Sess != nil:
		KillSession(a.Sess)
	}
}

// KillWithRanks kills a lost agent and, first, its ranks' process groups
// (pids; 0: not reported) if it runs on this machine: elsewhere they mean
// nothing here (a fence kills them there).
func (a AgentEnd) KillWithRanks(pids []int) {
	if a.Local != nil {
		for _, pid := range pids {
			if pid > 0 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	}
	a.Kill()
}

// Wait waits for the agent's process or its session to end.
func (a AgentEnd) Wait() {
	switch {
	case a.Local != nil:
		_ = a.Local.Wait()
	case a.Sess != nil:
		_ = a.Sess.Wait()
	}
}
