package agent

import (
	"io"
	"os"
	"strconv"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// newPhaseLog returns the agent's phase log if traceEnv is set (nil
// otherwise).
func newPhaseLog(w io.Writer) *proto.PhaseLog {
	s := os.Getenv(proto.TraceEnv)
	if s == "" {
		return nil
	}
	ns, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil
	}
	return &proto.PhaseLog{W: w, T0: time.Unix(0, ns)}
}
