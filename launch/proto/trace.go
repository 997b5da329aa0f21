package proto

import (
	"io"
	"time"
)

// traceEnv is set by a front-end run with --verbose in the environment of
// the agent it starts on this machine (on a socketpair): the front-end's
// start, in Unix nanoseconds. The agent then prints its own phases (its
// process running, its job received, its ranks forked and ended, its
// shutdown) on stderr, timed from that start as the front-end's --verbose
// lines are, so that one run shows where a short job's time goes on both
// sides of the link (docs/benchmarks.md).
const TraceEnv = "FTLAUNCH_TRACE_START"

// phaseLog prints an agent's phases; a nil *phaseLog prints nothing.
type PhaseLog struct {
	W  io.Writer
	T0 time.Time
}
