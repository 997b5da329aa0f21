package launcher

import (
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
)

// Agents is how a job's agents are started, as ftlaunch run's flags say
// it: over a spawner on the placement's hosts (SSH sessions or srun
// steps), else as local processes; and what interior agents are told to
// start theirs with (Spec).
type Agents struct {
	Path string // the ftlaunch executable agents run from (on every node)
	// Spawner starts agents on the placement's hosts (nil: this machine);
	// Launcher is how it starts them, "ssh" or "slurm" (for interior
	// agents and calibration).
	Spawner  spawn.Spawner
	Launcher string
	// GroupStart starts the front-end's agents with one group start when
	// the spawner can (one srun step for all: --slurm-start group).
	GroupStart bool
	Batch      int // leaf launchers start their children in batches of this size
	// How interior agents start their children over SSH: the OpenSSH
	// configuration file (an absolute path; "" for ~/.ssh/config), whether
	// they trust unknown host keys, and whether sessions forward ssh-agent.
	SSHConfig       string
	SSHAcceptNew    bool
	SSHForwardAgent bool
	// InProcess runs this machine's agent of a local launch in the
	// front-end's process where it can (StartLocal): a Go process's start
	// less; a /bin/sh guard kills the ranks' process groups if the
	// front-end dies.
	InProcess bool
}

// Remote reports whether agents start on other hosts (a spawner), not as
// local processes.
func (g Agents) Remote() bool { return g.Spawner != nil }

// Slurm reports whether agents start as srun steps.
func (g Agents) Slurm() bool { return g.Launcher == "slurm" }

// Spec tells an agent how to start its children (leaf: it launches
// leaves, in batches).
func (g Agents) Spec(leaf bool) proto.LaunchSpec {
	l := proto.LaunchSpec{Mode: "local", AgentPath: g.Path}
	switch {
	case g.Slurm():
		l.Mode = "slurm"
	case g.Remote():
		l.Mode, l.SSHConfig, l.AcceptNew, l.ForwardAgent = "ssh", g.SSHConfig, g.SSHAcceptNew, g.SSHForwardAgent
	}
	if leaf {
		l.Batch = g.Batch
	}
	return l
}

// StartedBy names how agents are started, as --verbose and the state log
// say it: an SSH session, an srun step, or a local process (test nodes,
// or the one agent of a job on this machine).
func (g Agents) StartedBy() string {
	switch {
	case !g.Remote():
		return journal.StartProcess
	case g.Slurm():
		return journal.StartSrun
	}
	return journal.StartSSH
}
