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
	// Wait waits until it ended, at most d.
	Wait(d time.Duration)
}

// Resume builds and starts a successor root from the replica's state (the
// root package's Resume, which launch injects: the agent does not import
// the root).
type Resume func(ctx context.Context, cfg launcher.ResumeConfig) (Successor, error)
