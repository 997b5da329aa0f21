package launcher

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/topology/plan"
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

// TreeKind is the launch tree's kind for the one asked (--tree; "":
// auto) as g starts agents: one srun step for every agent (GroupStart on
// Slurm) is the front-end's start of them all, a flat tree (flat: the
// kind asked was not).
func (g Agents) TreeKind(tree string) (_ plan.Kind, flat bool, err error) {
	kind, err := plan.ParseKind(cmp.Or(tree, "auto"))
	if err != nil {
		return kind, false, fmt.Errorf("--tree: %w", err)
	}
	if !g.Slurm() || !g.GroupStart || kind.Shape == plan.Flat {
		return kind, false, nil
	}
	k, _ := plan.ParseKind("flat")
	return k, true, nil
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

// Model is a launch of ranks by these agents as the launch-time model
// takes it (calibrate.Launch): calibrated per launcher and for local
// processes apart, and kept only for agents started one by one on other
// hosts (a group start measures no single agent's start).
func (g Agents) Model(ranks int, warnf, verbosef func(string, ...any)) calibrate.Launch {
	return calibrate.Launch{Launcher: g.Launcher, StartedBy: g.StartedBy(), Local: !g.Remote(),
		Keep: g.Remote() && !g.GroupStart, Ranks: ranks, Warnf: warnf, Verbosef: verbosef}
}

// OwnAddr is the address the agents reach this machine at: its own first
// address for agents on other hosts, else loopback.
func (g Agents) OwnAddr() string {
	if addrs := proto.OwnAddrs(); g.Remote() && len(addrs) > 0 {
		return addrs[0]
	}
	return "127.0.0.1"
}

// Listen opens the root's listener for its agents' links (and the
// adoption and control connections that come to it) with the root's
// credentials: on every interface for agents on other hosts, on loopback
// for local processes posing as nodes, which a local spawner starts. It
// returns the spawner of the root's children and the addresses they dial
// back (nil: the bootstrap's own).
func (g Agents) Listen(ctx context.Context, creds *secure.Credentials) (net.Listener, spawn.Spawner, []string, error) {
	addr, hosts, sp := ":0", []string(nil), g.Spawner
	switch {
	case sp == nil:
		ls, err := NewLocalSpawner()
		if err != nil {
			return nil, nil, nil, err
		}
		addr, hosts, sp = "127.0.0.1:0", []string{"127.0.0.1"}, ls
	case g.Slurm():
		hosts = proto.OwnAddrs() // srun says nothing of where its caller is
	}
	ln, err := secure.Listen(ctx, "tcp", addr, creds)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("listen for agents: %w", err)
	}
	return ln, sp, hosts, nil
}

// RootLauncher is the root's launcher of its children over sp (Listen's),
// whose links come back to ln at hosts; leaf: the root launches leaves,
// in batches. One group start starts them all where the spawner can and
// GroupStart asks.
func (g Agents) RootLauncher(sp spawn.Spawner, ln net.Listener, hosts []string, leaf bool, children []proto.ChildSpec) *Launcher {
	batch := 0
	if leaf {
		batch = g.Batch
	}
	l := NewLauncher(sp, []string{g.Path, "agent", "--connect"}, ln.Addr().(*net.TCPAddr).Port, hosts, batch, children)
	if gs, ok := sp.(GroupSpawner); ok && g.GroupStart {
		l.Group = gs
	}
	return l
}

// StartAgain starts children after the launch (a lost agent's next
// incarnation, or a root's children never started), each on a goroutine
// of the caller's (goFunc, which joins it), reported to report; ctx ends
// the starts.
func (l *Launcher) StartAgain(ctx context.Context, cs []proto.ChildSpec, goFunc func(func()), report func(LaunchResult)) {
	for i := range cs {
		c := cs[i]
		ch := l.Expect(c.Name, c.Inc)
		goFunc(func() { report(l.Start(ctx, &c, ch, time.Now())) })
	}
}

// IssueRoot makes a job's CA and, issued by it, the front-end root's
// credentials (proto.RootName), which its listener and its replica's
// transport present.
func IssueRoot(job string) (*secure.CA, *secure.Credentials, error) {
	ca, err := secure.NewJobCA(job)
	if err != nil {
		return nil, nil, fmt.Errorf("job credentials: %w", err)
	}
	creds, err := ca.Issue(proto.RootName)
	if err != nil {
		return nil, nil, fmt.Errorf("job credentials: %w", err)
	}
	return ca, creds, nil
}

// RootStart is how a front-end's root starts its children (StartRoot).
type RootStart struct {
	Creds    *secure.Credentials // the root's, for its listener
	Job      string
	Leaf     bool // the root launches leaves (in batches)
	Children []proto.ChildSpec
	Logf     func(format string, args ...any)
	// Go starts a goroutine the root joins once ctx ended.
	Go func(func())
	// Asked takes a connection that asks something of the root (an
	// orphan's adoption, job control), from the accept loop: it must hand
	// it on, or close it once ctx ended.
	Asked func(AdoptRequest)
	// Started takes each child's start (Launcher.Run's report).
	Started func(LaunchResult)
}

// RootLaunch is a root's launch of its children, under way.
type RootLaunch struct {
	Listener net.Listener       // where the agents, adoptions and job control come
	Cancel   context.CancelFunc // ends the starts under way (not a relaunch's)
	// Relaunch starts children after the launch (a lost agent's next
	// incarnation), each reported to report, until ctx ends.
	Relaunch func(cs []proto.ChildSpec, report func(LaunchResult)) error
	Fences   *Fences // the fences of lost agents' nodes, with the same spawner
}

// StartRoot opens the root's listener (Listen) and starts its children
// with its launcher (RootLauncher) on goroutines of rs.Go: the accept
// loop, which ends once ctx ends (its listener closes), and the launch,
// whose sessions' watchers are joined once ctx ended (Wait, bounded).
func (g Agents) StartRoot(ctx context.Context, rs RootStart) (*RootLaunch, error) {
	ln, sp, hosts, err := g.Listen(ctx, rs.Creds)
	if err != nil {
		return nil, err
	}
	l := g.RootLauncher(sp, ln, hosts, rs.Leaf, rs.Children)
	l.Logf, l.Job = rs.Logf, rs.Job
	rs.Go(func() {
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		defer stop()
		AcceptLoop(ln, l, nil, func(conn net.Conn, h proto.Hello) { rs.Asked(AdoptRequest{Conn: conn, Hello: h}) })
	})
	lctx, cancel := context.WithCancel(ctx)
	rs.Go(func() {
		l.Run(lctx, rs.Started)
		<-ctx.Done() // the sessions (relaunched ones too) end with the job
		l.Wait(SessionsWait)
	})
	return &RootLaunch{
		Listener: ln, Cancel: cancel,
		Relaunch: func(cs []proto.ChildSpec, report func(LaunchResult)) error {
			l.StartAgain(ctx, cs, rs.Go, report)
			return nil
		},
		Fences: NewFences(func(ctx context.Context, node string, upTo uint64) (string, error) {
			return l.Fence(ctx, rs.Job, node, upTo)
		}, rs.Go),
	}, nil
}
