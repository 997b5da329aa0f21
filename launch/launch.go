package launch

// The facade: a job's options, its result, and Run, which serves them with
// a root (launch/root) over agents (launch/agent), the agent's entry, and
// the names the commands use from the packages below.

import (
	"context"
	"io"
	"net"

	"github.com/ftlaunch/ftlaunch/launch/agent"
	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/root"
)

// Exit codes of ftlaunch itself (a rank's failure is reported with the
// rank's own code).
const (
	ExitLauncher = root.ExitLauncher // ftlaunch failed: an agent could not start or was lost
	ExitUsage    = root.ExitUsage    // bad command line
	ExitTimeout  = root.ExitTimeout  // --timeout expired
)

type (
	// Options describe one job run from this machine.
	Options = root.Options
	// Result is how a job ended.
	Result = root.Result
	// App is one program of an MPMD job.
	App = proto.App
	// ProgramError says why a program cannot be run.
	ProgramError = proto.ProgramError
	// Live is a running job's live report (its job directory's live.json).
	Live = journal.Live
	// Calibration is a launcher's measured costs (--tree auto).
	Calibration = calibrate.Calibration
)

var (
	// ReadLive reads a job directory's live report.
	ReadLive = journal.ReadLive
	// CalibrationPath and LoadCalibration find and read a launcher's
	// calibration.
	CalibrationPath = calibrate.CalibrationPath
	LoadCalibration = calibrate.LoadCalibration
	// ResolveProgram finds a program as a rank would (PATH, wdir).
	ResolveProgram = proto.ResolveProgram
	// LookupEnv is an environment's value of key.
	LookupEnv = proto.LookupEnv
	// SSHSpawner starts agents over SSH; HostSpawner starts those on
	// this machine's own names locally.
	SSHSpawner  = launcher.SSHSpawner
	HostSpawner = launcher.HostSpawner
)

// AgentMain is the body of the internal `ftlaunch agent` command; it
// returns the process's exit code.
func AgentMain(ctx context.Context, args []string, stderr io.Writer) int {
	return agent.Main(ctx, args, stderr, resume)
}

// resume gives a replica agent the root's successor.
func resume(ctx context.Context, cfg launcher.ResumeConfig) (agent.Successor, error) {
	s, err := root.Resume(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Run launches the job and returns once every rank ended and every agent
// exited. Problems that prevent any rank from starting (an agent that
// cannot be spawned) are returned as errors. A local launch's agent may
// run in this process (Options.Agents.InProcess): the root gets the agent's
// entry from here, as it does not import the agent.
func Run(ctx context.Context, opts Options) (Result, error) {
	return root.Run(ctx, opts, root.LocalHooks{Run: runLocal})
}

func runLocal(ctx context.Context, conn net.Conn, log io.Writer, trace *proto.PhaseLog, guard launcher.RankGuard) error {
	return agent.RunLocal(ctx, conn, log, trace, guard)
}
