package launch

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// traceEnv is set by a front-end run with --verbose in the environment of
// the agent it starts on this machine (on a socketpair): the front-end's
// start, in Unix nanoseconds. The agent then prints its own phases (its
// process running, its job received, its ranks forked and ended, its
// shutdown) on stderr, timed from that start as the front-end's --verbose
// lines are, so that one run shows where a short job's time goes on both
// sides of the link (docs/benchmarks.md).
const traceEnv = "FTLAUNCH_TRACE_START"

// phaseLog prints an agent's phases; a nil *phaseLog prints nothing.
type phaseLog struct {
	w  io.Writer
	t0 time.Time
}

// newPhaseLog returns the agent's phase log if traceEnv is set (nil
// otherwise).
func newPhaseLog(w io.Writer) *phaseLog {
	s := os.Getenv(traceEnv)
	if s == "" {
		return nil
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &phaseLog{w: w, t0: time.Unix(0, ns)}
}

// at prints one phase, reached at t.
func (p *phaseLog) at(t time.Time, format string, args ...any) {
	if p == nil {
		return
	}
	fmt.Fprintf(p.w, "ftlaunch agent: [%7.3fs] "+format+"\n", append([]any{t.Sub(p.t0).Seconds()}, args...)...)
}

// logf prints one phase, reached now.
func (p *phaseLog) logf(format string, args ...any) { p.at(time.Now(), format, args...) }
