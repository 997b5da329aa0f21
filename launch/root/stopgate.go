package root

import (
	"os"
	"syscall"
)

// stopGate decides which SIGCONT the front-end forwards to the ranks: only
// one that follows a stop it forwarded them (SIGTSTP, as Ctrl-Z sends). A
// SIGCONT that ends a stop of the front-end itself (SIGSTOP, which it
// cannot catch: a debugger, a job scheduler's suspend, a test's stall) is
// its own: the ranks were never stopped, and a rank that traps SIGCONT
// would take it for a resume that never was. Owned by the root's loop.
type stopGate struct {
	stopped bool // a stop was forwarded and no SIGCONT since
}

// forward returns the signal that goes on to the ranks for sig, if any,
// and notes a stop that does. A terminal's stop signals (SIGTSTP, SIGTTIN,
// SIGTTOU) go on as SIGSTOP: each rank is a session of its own, an
// orphaned process group, whose processes the kernel does not stop for
// those.
func (g *stopGate) forward(sig os.Signal) (os.Signal, bool) {
	switch sig {
	case syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU:
		g.stopped = true
		return syscall.SIGSTOP, true
	case syscall.SIGCONT:
		if !g.stopped {
			return sig, false
		}
		g.stopped = false
	}
	return sig, true
}
