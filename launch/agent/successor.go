package agent

import (
	"context"
	"net"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// Successor is a root that took over the job from its lost front-end, run
// by the replica agent that won the root group's election.
type Successor interface {
	// Adopt hands it an orphaned agent's request for adoption.
	Adopt(conn net.Conn, h proto.Hello)
	// Wait waits until it ended, at most d. It ends by itself once every
	// agent it adopted is done, or when the context it was started in
	// (Resume's ctx) is cancelled.
	Wait(d time.Duration)
}

// Resume builds and starts a successor root from the replica's state (the
// root package's Resume, which launch injects: the agent does not import
// the root). ctx is the successor's own: the agent cancels it to stop the
// root (stopSuccessor), then joins it with Wait.
type Resume func(ctx context.Context, cfg launcher.ResumeConfig) (Successor, error)

// successorRun is the successor root an agent runs, and how it stops it;
// guarded by the agent's mu.
type successorRun struct {
	s    Successor          // nil: none runs
	stop context.CancelFunc // cancels its context
	// over: the agent's link ended and it stopped its successor (or had
	// none): one that a takeover under way starts is stopped at once.
	over bool
}

// successorGrace is how long an agent whose link ended lets the successor
// root it runs end by itself: it ends after every agent it adopted, this
// one's own link included.
const successorGrace = 10 * time.Second

// untilEnded is a Successor.Wait without a bound: a join.
const untilEnded = time.Duration(1<<63 - 1)

// stopSuccessor ends the successor root this agent runs, if any: it lets
// it end by itself within successorGrace, then cancels its context and
// waits until it ended (its loop returns, its state log closes, its
// goroutines are joined). No successor starts after it (over).
func (a *Agent) stopSuccessor() {
	a.mu.Lock()
	run := a.fo.successor
	a.fo.successor.over = true
	a.mu.Unlock()
	if run.s == nil {
		return
	}
	run.s.Wait(successorGrace)
	run.stop()
	run.s.Wait(untilEnded)
}
