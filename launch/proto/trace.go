package proto

import (
	"fmt"
	"io"
	"time"
)

// TraceEnv is set by a front-end run with --verbose in the environment of
// the agent it starts on this machine (on a socketpair): the front-end's
// start, in Unix nanoseconds. The agent then prints its own phases (its
// process running, its job received, its ranks forked and ended, its
// shutdown) on stderr, timed from that start as the front-end's --verbose
// lines are, so that one run shows where a short job's time goes on both
// sides of the link (docs/benchmarks.md).
const TraceEnv = "FTLAUNCH_TRACE_START"

// PhaseLog prints an agent's phases; a nil *phaseLog prints nothing.
type PhaseLog struct {
	W  io.Writer
	T0 time.Time
}

// At prints one phase, reached at t.
func (p *PhaseLog) At(t time.Time, format string, args ...any) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.W, "ftlaunch agent: [%7.3fs] "+format+"\n", append([]any{t.Sub(p.T0).Seconds()}, args...)...)
}

// Logf prints one phase, reached now.
func (p *PhaseLog) Logf(format string, args ...any) { p.At(time.Now(), format, args...) }
