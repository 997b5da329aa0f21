package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/launcher"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/pmix"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/launch/srunspawn"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/recovery"
)

const runUsage = `Usage: ftlaunch run [flags] PROGRAM [ARGS...]
       ftlaunch run [flags] -n N1 PROG1 [ARGS...] : -n N2 PROG2 [ARGS...] : ...

Runs PROGRAM as a parallel job of -n ranks. Flags end at PROGRAM: everything
after it is the program's own, up to a lone ':' that starts the next block of
an MPMD job (ranks numbered in order across the blocks, one PMI world;
MPI_APPNUM is the block's index). Flags take one or two dashes, and their
value as the next argument or after '='; a flag without a value (--label)
takes true or false as the next argument too (--label false is --label=false).
Spellings of mpiexec, mpirun and
srun are accepted where they mean the same (docs/guide.md has the table).

Per block (before its program):
  -n, -np, --ntasks N      number of ranks (default 1; with hosts or Slurm: one per slot)
  --wdir, --chdir, -wd DIR the ranks' working directory (default: the current directory)
  -x, --export VAR[=VALUE] pass VAR to the ranks (the whole environment is passed anyway)
  --env VAR=VALUE          set VAR for the ranks (also: --env VAR VALUE)
For the whole job:
  -genv VAR VALUE          set VAR for the ranks of every block (also -genv VAR=VALUE)
  -l, --label, --tag-output  prefix output lines with "[rank] " (default off)
  --output-dir DIR         write each rank's output to DIR/rank.R.out and DIR/rank.R.err
  --kill-after T           delay between SIGTERM and SIGKILL when terminating ranks (default 5s)
  --timeout T              end the job after T (default: $MPIEXEC_TIMEOUT, or none); T is
                           seconds (60) or a duration (1m30s), also for --kill-after
  --restart none|rank|job  what a failure costs (a rank's exit or signal, a lost agent or node,
                           also during the launch):
                           none (default): the job; it ends, every rank terminated
                           rank: the failed ranks, started again as their next incarnation:
                             a plain program's alone, nothing else stopped; a Go client
                             library program's around a suspend, patch, resume of every rank
                             (once the node table exists: a failure before ends the job); an
                             MPI program (PMI-1) is refused at its init: use job
                           job: a restart of every rank, fresh PMI key space (any program; MPI
                             ones restart from their own checkpoints)
                           A lost agent starts again on its node, else (silent) on the next
                           spare, else on a survivor's free slots (--oversubscribe); the lost
                           one is fenced first. docs/recovery.md has the whole matrix.
  --max-restarts N         restarts allowed: per rank under rank, per job under job (default 3)
  --mpi pmi1|pmix|none     what ranks are served (default: PMI-1, MPICH's, to every rank, and
                           PMIx, Open MPI's, to programs linked with Open MPI or OpenPMIx and
                           to scripts); pmix: PMIx to every rank (and PMI-1); none: neither
  --state-dir DIR          keep the job's state log in DIR/JOBID (default
                           $XDG_STATE_HOME/ftlaunch/jobs or ~/.local/state/ftlaunch/jobs;
                           read it with ftlaunch inspect)
  --keep-logs N            keep the newest N job logs in the default state directory (default
                           $FTLAUNCH_KEEP_LOGS, else 100; 0: all); an explicit --state-dir is never pruned
  --replicas R             keep the state log on R root replicas (1, 3 or 5; default 1): the
                           front-end and R-1 agents on other nodes, a raft group over mutual TLS
  --test-nodes K           run K agents on this machine, posing as K nodes (a launch tree
                           of local processes: the multi-node code path without SSH)
  --spare-nodes S          the last S hosts (or test nodes) are spares, not counted in -n:
                           an agent starts on the next one in place of a node that went
                           silent (with --restart rank|job; a child of the root); with
                           none left, on a surviving node's free slots (--oversubscribe: shared)
  --spares HOST,...        these hosts are the spares (taken out of the allocation if in it)

Where agents start (--launcher local|ssh|slurm; default: ssh when hosts are given, else
slurm inside a Slurm allocation (SLURM_JOB_NODELIST set), else local):
  --launcher MODE          local: this machine; ssh: the hosts below; slurm: the allocation's
                           nodes, agents started by srun (-n defaults to SLURM_TASKS_PER_NODE's total)
  --slurm-start auto|step|group  group: one srun step for all agents, a flat tree (a node's
                           loss ends only its own task: the step runs with --no-kill); step: one
                           srun step per agent, as a tree; auto (default): group for a flat or
                           auto tree of up to 128 agents, else step

Hosts (agents start over SSH, one per host; ftlaunch itself runs no ranks; hosts that
all name this machine - localhost, 127.0.0.1, its host name - run here without SSH):
  -H, --host, --hosts h1,h2:4  the hosts, with optional slot counts; repeated flags and
                           hosts add up (-H a,b,a gives a 2 slots)
  --hostfile, -f, -machinefile FILE  one host per line: "host", "host:N" or "host slots=N
                           [max_slots=M]"; # comments; a host on several lines adds its slots
  --ppn, --npernode N      ranks per host (replaces the slot counts; also with --test-nodes)
  --map-by slot|node|ppr:N:node  block placement (default), round-robin over hosts, or N per host
  --oversubscribe          allow more ranks than slots (and, with --bind-to core, than cores);
                           under --restart, a silent node's ranks may share a survivor's slots
  --bind-to none|core|socket  bind each rank to a core of its own (round-robin over the
                           node's cores) or to a socket (default none); --verbose reports it
  --ssh-config FILE        OpenSSH client config (default ~/.ssh/config)
  --ssh-accept-new         trust unknown host keys on first use (recorded in known_hosts)
  --agent-path PATH        ftlaunch on the hosts (default: this executable's path — a shared file system)

Launch tree (hosts and --test-nodes): the front-end starts some agents, which
start others, as in ftlaunch plan.
  --tree KIND              auto (default: the fastest tree on the calibrated model), greedy, kary:K, 2level,
                           binomial, flat
  --batch B                leaf launchers start their children B at a time (default: all at once)
  --prestage               copy the program down the tree to each node's local storage (TMPDIR)
                           before its ranks start, and run it from there
  -v, --verbose            report launch phases on stderr
  --version                print the version
  -h, --help               print this help

Each rank gets FTLAUNCH_RANK, FTLAUNCH_SIZE, FTLAUNCH_LOCAL_RANK,
FTLAUNCH_LOCAL_SIZE, FTLAUNCH_NODE, FTLAUNCH_NODEID, FTLAUNCH_JOBID,
FTLAUNCH_APPNUM and FTLAUNCH_FD (the rank-protocol socket); PMI_FD, PMI_RANK,
PMI_SIZE, PMI_ID, PMI_PORT (MPICH); MPI_LOCALRANKID, MPI_LOCALNRANKS (as
Hydra) and OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, _NODE_RANK
(as Open MPI). Exit status: 0 when every rank exits 0; else the first
failure's code (128+N for signal N); 2 for usage errors, 124 when --timeout
expires, 126/127 for a program that cannot be run.
`

// rankEnv is the ranks' environment: ours, with -genv, -x, --env and
// --export settings applied in order.
func rankEnv(base []string, settings []string) ([]string, error) {
	env := append([]string(nil), base...)
	for _, s := range settings {
		if strings.Contains(s, "=") {
			env = append(env, s)
			continue
		}
		v, ok := os.LookupEnv(s)
		if !ok {
			return nil, fmt.Errorf("-x %s: %s is not set in this environment", s, s)
		}
		env = append(env, s+"="+v)
	}
	return env, nil
}

// resolveApps turns the command line's blocks into the job's programs:
// each with its working directory, environment and a program that exists.
// On error it returns the exit status to report.
func resolveApps(f *runFlags) ([]launch.App, int, error) {
	var apps []launch.App
	cwd := ""
	for _, a := range f.apps {
		wdir := a.wdir
		if wdir == "" {
			if cwd == "" {
				var err error
				if cwd, err = os.Getwd(); err != nil {
					return nil, launch.ExitLauncher, fmt.Errorf("current directory: %w", err)
				}
			}
			wdir = cwd
		}
		if st, err := os.Stat(wdir); err != nil || !st.IsDir() {
			return nil, launch.ExitUsage, fmt.Errorf("--wdir %s: not a directory", wdir)
		}
		env, err := rankEnv(os.Environ(), append(append([]string(nil), f.genv...), a.env...))
		if err != nil {
			return nil, launch.ExitUsage, err
		}
		if _, err := launch.ResolveProgram(a.argv[0], wdir, launch.LookupEnv(env, "PATH")); err != nil {
			var pe *launch.ProgramError
			if errors.As(err, &pe) {
				return nil, pe.Code, err
			}
			return nil, 127, err
		}
		apps = append(apps, launch.App{N: a.n, Argv: a.argv, Env: env, Wdir: wdir})
	}
	return apps, 0, nil
}

func runCommand(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	// The signals the job forwards are caught from before it starts: each
	// is a round trip with the runtime's signal thread (0.3-1.4 ms for
	// six of them on the 2-core development machine), done while the
	// command line is read. They are not released: the process exits once
	// runCommand returns.
	sigs := make(chan os.Signal, 8)
	caught := make(chan struct{})
	go func() {
		defer close(caught)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGCONT)
	}()
	defer func() { <-caught }()
	f, err := parseRunFlags(args, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v (see: ftlaunch run --help)\n", err)
		return launch.ExitUsage
	}
	if f.help {
		fmt.Fprint(stdout, runUsage)
		return 0
	}
	if f.version {
		fmt.Fprintf(stdout, "ftlaunch %s\n", version)
		return 0
	}
	apps, code, err := resolveApps(f)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
		return code
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: cannot find my own executable: %v\n", err)
		return launch.ExitLauncher
	}
	var placement *alloc.Placement
	var spawner *sshspawn.Spawner
	var sp spawn.Spawner
	sshConfig := f.sshConfig
	forward := false
	testNodes := f.testNodes
	switch f.launcher {
	case "slurm":
		if placement, err = place(f, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
			return launch.ExitUsage
		}
		if placement == nil {
			fmt.Fprintf(stderr, "ftlaunch run: --launcher slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is not set)\n")
			return launch.ExitUsage
		}
		srun, err := srunspawn.New(srunspawn.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: --launcher slurm: %v\n", err)
			return launch.ExitUsage
		}
		sp = srun
		if f.agentPath != "" {
			self = f.agentPath
		}
	case "ssh":
		if placement, err = place(f, nil); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
			return launch.ExitUsage
		}
		local := localNames(os.Hostname)
		nLocal := 0
		for _, n := range placement.Nodes {
			if local(n.Name) {
				nLocal++
			}
		}
		if !f.launcherSet && nLocal == len(placement.Nodes) {
			// Hosts that all name this machine run here, without SSH,
			// as Hydra does: one agent, or (several names) local agents
			// posing as nodes.
			if len(placement.Nodes) > 1 {
				testNodes = len(placement.Nodes)
			}
			f.launcher = "local"
			break
		}
		policy := sshspawn.HostKeyFromConfig
		if f.acceptNew {
			policy = sshspawn.HostKeyAcceptNew
		}
		// With ssh-agent, interior agents of the tree authenticate through
		// an agent forwarded down the tree.
		forward = os.Getenv("SSH_AUTH_SOCK") != ""
		if spawner, err = sshspawn.New(sshspawn.Options{ConfigFile: f.sshConfig, HostKeyPolicy: policy, ForwardAgent: forward}); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: ssh: %v\n", err)
			return launch.ExitUsage
		}
		defer spawner.Close()
		sp = launch.SSHSpawner(spawner)
		if !f.launcherSet && nLocal > 0 {
			// This machine among others: its agent starts here, the
			// others' over SSH.
			if err := nameThisMachine(placement, local, os.Hostname); err != nil {
				fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
				return launch.ExitUsage
			}
			sp = launch.HostSpawner(sp, local)
		}
		// Interior agents read the same configuration: give them its
		// absolute path (the file system is shared).
		if sshConfig != "" && sshConfig != "none" {
			if sshConfig, err = filepath.Abs(sshConfig); err != nil {
				fmt.Fprintf(stderr, "ftlaunch run: --ssh-config: %v\n", err)
				return launch.ExitUsage
			}
		}
		if f.agentPath != "" {
			self = f.agentPath
		}
	default:
		// This machine, or test nodes: placed as on hosts when asked to
		// (--ppn, --map-by).
		if f.ppn > 0 || f.mapBy != "" {
			if placement, err = placeLocal(f, os.Hostname); err != nil {
				fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
				return launch.ExitUsage
			}
		}
	}
	if f.mpi == "pmix" && sp == nil {
		// Every agent runs on this machine: without OpenPMIx here, no
		// rank could be served; say so before anything starts. (Agents
		// on other hosts check for themselves: a rank that cannot be
		// served fails to start.)
		if err := pmix.Available(); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: --mpi pmix: %v\n", err)
			return launch.ExitUsage
		}
	}
	if placement != nil {
		f.n = len(placement.Ranks)
		if len(apps) == 1 {
			apps[0].N = f.n // one rank per slot
		}
	}
	var mpmd []launch.App
	if len(apps) > 1 {
		mpmd = apps
	}
	// Old job logs are pruned while the job's end is committed (its sync
	// is the disk's work, the pruning the CPU's), or after a launch that
	// failed.
	prune := sync.OnceFunc(func() { pruneLogs(f, stderr) })
	<-caught
	in, restoreStdin := output.Pollable(forwardableStdin(stdin))
	defer restoreStdin()

	res, err := launch.Run(context.Background(), launch.Options{
		N: f.n, Argv: apps[0].Argv, Env: apps[0].Env, Wdir: apps[0].Wdir, Apps: mpmd, Label: f.label, OutputDir: f.outputDir,
		KillAfter: f.killAfter, Timeout: f.timeout, Restart: f.restart, MaxRestarts: f.maxRestarts, Spares: f.spares, Verbose: f.verbose, TestNodes: testNodes,
		Bind: f.bindTo, BindShare: f.oversubscribe, Oversubscribe: f.oversubscribe, MPI: f.mpi,
		Stdin: in, Stdout: stdout, Stderr: stderr, Signals: sigs, Detach: detach(stderr),
		Placement: placement, Tree: f.tree, Prestage: f.prestage, StateDir: f.stateDir, Replicas: f.replicas, AtEnd: prune,
		Agents: launcher.Agents{Path: self, Spawner: sp, Launcher: f.launcher, GroupStart: groupStart(f, placement), Batch: f.batch,
			SSHConfig: sshConfig, SSHAcceptNew: f.acceptNew, SSHForwardAgent: forward,
			InProcess: agentInProcess(os.Getenv(agentInProcessEnv), f.restart)},
	})
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
	}
	if sa := res.SteppedAside; sa != nil && sa.JobDir != "" {
		// The front-end lost the lead of the root group for good: a
		// replica agent runs the root. The user's session goes on here,
		// as ftlaunch attach follows a job (docs/state.md).
		fmt.Fprintf(stderr, "ftlaunch: following job %s under its new root (as ftlaunch attach %s does)\n", filepath.Base(sa.JobDir), filepath.Base(sa.JobDir))
		return attachCommand([]string{sa.JobDir}, stdout, stderr)
	}
	prune()
	return res.ExitCode
}

// groupStartMax is the most agents that --slurm-start auto starts with
// one srun step (and a flat tree); more start one step per agent, as a
// tree, so that no single host runs every srun and holds every link.
const groupStartMax = 128

// groupStart reports whether the agents start with one srun step for all
// (--slurm-start group, or auto for a flat or auto tree of at most
// groupStartMax agents) rather than one step each (docs/slurm.md: both
// keep a node's loss to that node's agent).
func groupStart(f *runFlags, p *alloc.Placement) bool {
	if f.launcher != "slurm" {
		return false
	}
	switch f.slurmMode {
	case "group":
		return true
	case "auto":
		return (f.tree == "auto" || f.tree == "flat") && p != nil && len(p.Nodes) <= groupStartMax
	}
	return false
}

// place reads the allocation from -H or --hostfile (or, with getenv, a
// Slurm allocation) and places the ranks on its hosts. It returns nil for
// no allocation.
func place(f *runFlags, getenv func(string) string) (*alloc.Placement, error) {
	a, err := alloc.Discover(alloc.Sources{HostList: strings.Join(f.hosts, ","), Hostfile: f.hostfile, Getenv: getenv})
	if err != nil {
		return nil, err
	}
	if len(a.Hosts) == 0 {
		return nil, nil
	}
	if err := takeSpares(f, &a); err != nil {
		return nil, err
	}
	return placeOn(f, a)
}

// takeSpares takes the spare hosts out of the allocation: its last
// --spare-nodes hosts, or those --spares names (which need not be in it).
// Spares run nothing until a node is lost (docs/recovery.md).
func takeSpares(f *runFlags, a *alloc.Allocation) error {
	switch {
	case f.spareNodes > 0 && f.testNodes == 0:
		if f.spareNodes >= len(a.Hosts) {
			return fmt.Errorf("--spare-nodes %d of an allocation of %d host(s) leaves no host for the job", f.spareNodes, len(a.Hosts))
		}
		k := len(a.Hosts) - f.spareNodes
		for _, h := range a.Hosts[k:] {
			f.spares = append(f.spares, h.Name)
		}
		a.Hosts = a.Hosts[:k]
	case len(f.spareHosts) > 0:
		spare := map[string]bool{}
		for _, h := range f.spareHosts {
			if spare[h] {
				return fmt.Errorf("--spares: %s named twice", h)
			}
			spare[h] = true
		}
		hosts := a.Hosts[:0:0]
		for _, h := range a.Hosts {
			if !spare[h.Name] {
				hosts = append(hosts, h)
			}
		}
		if len(hosts) == 0 {
			return errors.New("--spares names every host of the allocation: none is left for the job")
		}
		a.Hosts = hosts
		f.spares = append(f.spares, f.spareHosts...)
	}
	return nil
}

// placeOn places the job's ranks on a's hosts: -n of them, or without -n
// one per slot (--ppn per host).
func placeOn(f *runFlags, a alloc.Allocation) (*alloc.Placement, error) {
	mapBy, _, err := alloc.ParseMapBy(f.mapBy)
	if err != nil {
		return nil, err
	}
	np := f.n
	if !f.nSet && len(f.apps) == 1 {
		np = 0
		for _, h := range a.Hosts {
			np += max(h.Slots, 1)
		}
		if f.ppn > 0 {
			np = f.ppn * len(a.Hosts)
		}
	}
	return alloc.Place(a, alloc.Request{NP: np, PPN: f.ppn, MapBy: mapBy, Oversubscribe: f.oversubscribe})
}

// placeLocal places the ranks on this machine's nodes, as the front-end
// names them: node0, node1, ... for --test-nodes K > 1, else the host name.
func placeLocal(f *runFlags, hostname func() (string, error)) (*alloc.Placement, error) {
	var hosts []alloc.Host
	if f.testNodes > 1 {
		for i := range f.testNodes {
			hosts = append(hosts, alloc.Host{Name: "node" + strconv.Itoa(i)})
		}
	} else {
		name, err := hostname()
		if err != nil || name == "" {
			name = "localhost"
		}
		hosts = []alloc.Host{{Name: name}}
	}
	return placeOn(f, alloc.Allocation{Source: alloc.SourceNone, Hosts: hosts})
}

// localNames returns a test for host names that name this machine:
// localhost, a loopback address, or its host name (with or without its
// domain). Names are compared, never resolved.
func localNames(hostname func() (string, error)) func(string) bool {
	self, _ := hostname()
	short, _, _ := strings.Cut(self, ".")
	return func(name string) bool {
		name = strings.ToLower(name)
		switch {
		case name == "localhost", name == "localhost.localdomain", name == "::1", strings.HasPrefix(name, "127."):
			return true
		case self != "" && (strings.EqualFold(name, self) || strings.EqualFold(name, short)):
			return true
		}
		return false
	}
}

// nameThisMachine gives this machine's node, in a placement that also has
// other hosts, the machine's host name when the list called it localhost or
// 127.x: an agent deeper in the launch tree may be the one that starts it,
// over SSH, and there "localhost" would be its own machine. A list that
// names this machine twice (localhost and its host name) is refused: with
// other hosts, its nodes would not be told apart.
func nameThisMachine(p *alloc.Placement, local func(string) bool, hostname func() (string, error)) error {
	self, err := hostname()
	if err != nil || self == "" {
		return fmt.Errorf("host list with this machine: its host name: %v", err)
	}
	var names []string
	idx := -1
	for i, n := range p.Nodes {
		if local(n.Name) {
			names = append(names, n.Name)
			idx = i
		}
	}
	if len(names) > 1 {
		return fmt.Errorf("hosts %s all name this machine; with other hosts, name it once", strings.Join(names, ", "))
	}
	if idx >= 0 {
		p.Nodes[idx].Name = self
	}
	return nil
}

// forwardableStdin returns stdin if it should be forwarded to rank 0: not
// when it is a terminal of which we are not in the foreground (reading
// would stop us with SIGTTIN, as for any background job).
func forwardableStdin(stdin *os.File) *os.File {
	if stdin == nil {
		return nil
	}
	fd := int(stdin.Fd())
	if _, err := unix.IoctlGetTermios(fd, unix.TCGETS); err != nil {
		return stdin // not a terminal
	}
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != unix.Getpgrp() {
		return nil
	}
	return stdin
}

// agentInProcessEnv chooses where a local launch's agent runs: 0 (or
// false) as an `ftlaunch agent` process, any other value in the
// front-end's process (launch.Options.Agents.InProcess; docs/benchmarks.md
// says what it saves and docs/guide.md what it costs).
const agentInProcessEnv = "FTLAUNCH_AGENT_INPROCESS"

// agentInProcess says whether a local launch's agent runs in the
// front-end's process, given agentInProcessEnv's value: by default it does,
// but in a job that recovers from failures (--restart rank|job), where the
// agent is a process so that its crash is a failure of its own, which the
// root recovers from by starting it again.
func agentInProcess(env string, restart recovery.Policy) bool {
	switch strings.ToLower(strings.TrimSpace(env)) {
	case "":
		return restart == recovery.None
	case "0", "false", "no", "off":
		return false
	}
	return true
}

func launchAgentMain(ctx context.Context, args []string, stderr io.Writer) int {
	return launch.AgentMain(ctx, args, stderr)
}
