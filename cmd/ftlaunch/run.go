package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"github.com/ftlaunch/ftlaunch/launch/srunspawn"
	"github.com/ftlaunch/ftlaunch/launch/sshspawn"
	"github.com/ftlaunch/ftlaunch/overlay/plan"
)

const runUsage = `Usage: ftlaunch run [flags] PROGRAM [ARGS...]

Runs PROGRAM as a parallel job of -n ranks. Flags end at PROGRAM: everything
after it is the program's own. Flags take one or two dashes.

  -n, -np, --np N          number of ranks (default 1)
  --label                  prefix output lines with "[rank] " (default true; --label=false: off)
  --output-dir DIR         write each rank's output to DIR/rank.R.out and DIR/rank.R.err
  --kill-after DURATION    delay between SIGTERM and SIGKILL when terminating ranks (default 5s)
  --timeout DURATION       end the job after DURATION (default: $MPIEXEC_TIMEOUT seconds, or none)
  --wdir DIR               the ranks' working directory (default: the current directory)
  -x VAR[=VALUE]           pass VAR to the ranks (the whole environment is passed by default)
  --env VAR=VALUE          set VAR for the ranks
  --state-dir DIR          keep the job's state log in DIR/JOBID (default
                           $XDG_STATE_HOME/ftlaunch/jobs or ~/.local/state/ftlaunch/jobs;
                           read it with ftlaunch inspect)
  --keep-logs N            keep the newest N job logs in the default state directory (default
                           $FTLAUNCH_KEEP_LOGS, else 100; 0: all); an explicit --state-dir is never pruned
  --replicas R             keep the state log on R root replicas (1, 3 or 5; default 1): the
                           front-end and R-1 agents on other nodes, a raft group over mutual TLS
  --test-nodes K           run K agents on this machine, posing as K nodes (a launch tree
                           of local processes: the multi-node code path without SSH)

Where agents start (--launcher local|ssh|slurm; default: ssh when hosts are given, else
slurm inside a Slurm allocation (SLURM_JOB_NODELIST set), else local):
  --launcher MODE          local: this machine; ssh: the hosts below; slurm: the allocation's
                           nodes, one srun step per agent (-n defaults to SLURM_TASKS_PER_NODE's total)
  --slurm-start step|group step (default): one srun step per agent, so a node's loss ends only
                           its own step; group: one step for all agents (fewer srun calls)

Hosts (agents start over SSH, one per host; ftlaunch itself runs no ranks):
  -H host1,host2:4         the hosts, with optional slot counts
  --hostfile FILE          one host per line: "host", "host:N" or "host slots=N"; # comments
  --ppn N                  ranks per host (replaces the slot counts)
  --map-by slot|node       block placement (default) or round-robin over hosts
  --oversubscribe          allow more ranks than slots
  --ssh-config FILE        OpenSSH client config (default ~/.ssh/config)
  --ssh-accept-new         trust unknown host keys on first use (recorded in known_hosts)
  --agent-path PATH        ftlaunch on the hosts (default: this executable's path — a shared file system)

Launch tree (hosts and --test-nodes): the front-end starts some agents, which
start others, as in ftlaunch plan.
  --tree KIND              auto (default: greedy on the calibrated model), greedy, kary:K, 2level,
                           binomial, flat
  --batch B                leaf launchers start their children B at a time (default: all at once)
  --prestage               copy the program down the tree to each node's local storage (TMPDIR)
                           before its ranks start, and run it from there
  --verbose                report launch phases on stderr
  --version                print the version
  --help                   print this help

Each rank gets FTLAUNCH_RANK, FTLAUNCH_SIZE, FTLAUNCH_LOCAL_RANK,
FTLAUNCH_LOCAL_SIZE, FTLAUNCH_NODE, FTLAUNCH_NODEID, FTLAUNCH_JOBID and
FTLAUNCH_FD (the rank-protocol socket). Exit status: 0 when every rank exits
0; else the first failure's code (128+N for signal N); 2 for usage errors,
124 when --timeout expires, 126/127 for a program that cannot be run.
`

// envList collects repeated -x / --env flags in order.
type envList struct {
	vals    *[]string
	needsEq bool
}

func (e envList) String() string { return "" }
func (e envList) Set(v string) error {
	if v == "" || strings.HasPrefix(v, "=") {
		return errors.New("want VAR or VAR=VALUE")
	}
	if e.needsEq && !strings.Contains(v, "=") {
		return errors.New("want VAR=VALUE")
	}
	*e.vals = append(*e.vals, v)
	return nil
}

type runFlags struct {
	n         int
	label     bool
	outputDir string
	killAfter time.Duration
	timeout   time.Duration
	wdir      string
	env       []string
	testNodes int
	verbose   bool
	tree      string
	batch     int
	prestage  bool
	stateDir  string
	launcher  string
	nSet      bool
	slurmMode string
	replicas  int
	keepLogs  int // -1: not given

	hosts, hostfile, mapBy, sshConfig, agentPath string
	ppn                                          int
	oversubscribe, acceptNew                     bool
	version                                      bool
	help                                         bool
}

func parseRunFlags(args []string, getenv func(string) string) (*runFlags, []string, error) {
	f := &runFlags{n: -1}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.IntVar(&f.n, "n", -1, "")
	fs.IntVar(&f.n, "np", -1, "")
	fs.BoolVar(&f.label, "label", true, "")
	fs.StringVar(&f.outputDir, "output-dir", "", "")
	fs.DurationVar(&f.killAfter, "kill-after", 5*time.Second, "")
	fs.DurationVar(&f.timeout, "timeout", 0, "")
	fs.StringVar(&f.wdir, "wdir", "", "")
	fs.Var(envList{vals: &f.env}, "x", "")
	fs.Var(envList{vals: &f.env, needsEq: true}, "env", "")
	fs.IntVar(&f.testNodes, "test-nodes", 0, "")
	fs.StringVar(&f.hosts, "H", "", "")
	fs.StringVar(&f.hosts, "host", "", "")
	fs.StringVar(&f.hostfile, "hostfile", "", "")
	fs.IntVar(&f.ppn, "ppn", 0, "")
	fs.StringVar(&f.mapBy, "map-by", "", "")
	fs.BoolVar(&f.oversubscribe, "oversubscribe", false, "")
	fs.StringVar(&f.sshConfig, "ssh-config", "", "")
	fs.BoolVar(&f.acceptNew, "ssh-accept-new", false, "")
	fs.StringVar(&f.agentPath, "agent-path", "", "")
	fs.BoolVar(&f.verbose, "verbose", false, "")
	fs.StringVar(&f.tree, "tree", "auto", "")
	fs.IntVar(&f.batch, "batch", 0, "")
	fs.BoolVar(&f.prestage, "prestage", false, "")
	fs.StringVar(&f.stateDir, "state-dir", "", "")
	fs.StringVar(&f.launcher, "launcher", "", "")
	fs.StringVar(&f.slurmMode, "slurm-start", "step", "")
	fs.IntVar(&f.replicas, "replicas", 1, "")
	fs.IntVar(&f.keepLogs, "keep-logs", -1, "")
	fs.BoolVar(&f.version, "version", false, "")
	fs.BoolVar(&f.help, "help", false, "")
	fs.BoolVar(&f.help, "h", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if f.help || f.version {
		return f, nil, nil
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	f.nSet = set["n"] || set["np"]
	switch {
	case !set["n"] && !set["np"]:
		f.n = 1
	case f.n < 1:
		return nil, nil, fmt.Errorf("-n must be at least 1, got %d", f.n)
	}
	if f.killAfter < 0 {
		return nil, nil, fmt.Errorf("--kill-after must not be negative, got %v", f.killAfter)
	}
	if f.timeout < 0 {
		return nil, nil, fmt.Errorf("--timeout must not be negative, got %v", f.timeout)
	}
	if !set["timeout"] {
		if s := getenv("MPIEXEC_TIMEOUT"); s != "" {
			secs, err := strconv.Atoi(s)
			if err != nil || secs < 0 {
				return nil, nil, fmt.Errorf("MPIEXEC_TIMEOUT=%q: want a number of seconds", s)
			}
			f.timeout = time.Duration(secs) * time.Second
		}
	}
	if f.testNodes < 0 {
		return nil, nil, fmt.Errorf("--test-nodes must not be negative, got %d", f.testNodes)
	}
	if _, err := plan.ParseKind(f.tree); err != nil {
		return nil, nil, fmt.Errorf("--tree: %w", err)
	}
	switch f.launcher {
	case "":
		switch {
		case f.hosts != "" || f.hostfile != "":
			f.launcher = "ssh"
		case getenv("SLURM_JOB_NODELIST") != "" && f.testNodes == 0:
			f.launcher = "slurm"
		default:
			f.launcher = "local"
		}
	case "local", "slurm":
		if f.hosts != "" || f.hostfile != "" {
			return nil, nil, fmt.Errorf("--launcher %s does not take hosts (-H, --hostfile)", f.launcher)
		}
	case "ssh":
		if f.hosts == "" && f.hostfile == "" {
			return nil, nil, errors.New("--launcher ssh needs hosts (-H or --hostfile)")
		}
	default:
		return nil, nil, fmt.Errorf("--launcher %q: want local, ssh or slurm", f.launcher)
	}
	if f.replicas != 1 && f.replicas != 3 && f.replicas != 5 {
		return nil, nil, fmt.Errorf("--replicas must be 1, 3 or 5, got %d", f.replicas)
	}
	if f.stateDir != "" {
		abs, err := filepath.Abs(f.stateDir)
		if err != nil {
			return nil, nil, fmt.Errorf("--state-dir: %w", err)
		}
		f.stateDir = abs
	}
	if f.slurmMode != "step" && f.slurmMode != "group" {
		return nil, nil, fmt.Errorf("--slurm-start %q: want step or group", f.slurmMode)
	}
	if f.launcher == "slurm" && f.testNodes > 0 {
		return nil, nil, errors.New("--test-nodes runs on this machine: not with --launcher slurm")
	}
	if f.batch < 0 {
		return nil, nil, fmt.Errorf("--batch must not be negative, got %d", f.batch)
	}
	if f.ppn < 0 {
		return nil, nil, fmt.Errorf("--ppn must not be negative, got %d", f.ppn)
	}
	if f.testNodes > 0 && (f.hosts != "" || f.hostfile != "") {
		return nil, nil, errors.New("--test-nodes runs on this machine: give it or hosts (-H, --hostfile), not both")
	}
	if !set["n"] && !set["np"] && (f.hosts != "" || f.hostfile != "") {
		f.n = 0 // one rank per slot, decided by the placement
	}
	if fs.NArg() == 0 {
		return nil, nil, errors.New("no program given")
	}
	return f, fs.Args(), nil
}

// rankEnv is the ranks' environment: ours, with -x/--env applied in order.
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

func runCommand(args []string, stdin *os.File, stdout, stderr io.Writer) int {
	f, argv, err := parseRunFlags(args, os.Getenv)
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
	wdir := f.wdir
	if wdir == "" {
		if wdir, err = os.Getwd(); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: current directory: %v\n", err)
			return launch.ExitLauncher
		}
	}
	if st, err := os.Stat(wdir); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "ftlaunch run: --wdir %s: not a directory\n", wdir)
		return launch.ExitUsage
	}
	env, err := rankEnv(os.Environ(), f.env)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
		return launch.ExitUsage
	}
	if _, err := launch.ResolveProgram(argv[0], wdir, launch.LookupEnv(env, "PATH")); err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
		var pe *launch.ProgramError
		if errors.As(err, &pe) {
			return pe.Code
		}
		return 127
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
	if f.launcher == "slurm" {
		if placement, err = place(f, os.Getenv); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
			return launch.ExitUsage
		}
		if placement == nil {
			fmt.Fprintf(stderr, "ftlaunch run: --launcher slurm: not inside a Slurm allocation (SLURM_JOB_NODELIST is not set)\n")
			return launch.ExitUsage
		}
		f.n = len(placement.Ranks)
		srun, err := srunspawn.New(srunspawn.Options{})
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: --launcher slurm: %v\n", err)
			return launch.ExitUsage
		}
		sp = srun
		if f.agentPath != "" {
			self = f.agentPath
		}
	}
	if f.launcher == "ssh" {
		if placement, err = place(f, nil); err != nil {
			fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
			return launch.ExitUsage
		}
		f.n = len(placement.Ranks)
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
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT)
	defer signal.Stop(sigs)

	res, err := launch.Run(context.Background(), launch.Options{
		N: f.n, Argv: argv, Env: env, Wdir: wdir, Label: f.label, OutputDir: f.outputDir,
		KillAfter: f.killAfter, Timeout: f.timeout, Verbose: f.verbose, TestNodes: f.testNodes,
		AgentPath: self, Stdin: forwardableStdin(stdin), Stdout: stdout, Stderr: stderr, Signals: sigs, Detach: detach(stderr),
		Placement: placement, SSH: sp, Tree: f.tree, Batch: f.batch, Prestage: f.prestage, StateDir: f.stateDir, Replicas: f.replicas,
		SSHConfig: sshConfig, SSHAcceptNew: f.acceptNew, SSHForwardAgent: forward, Launcher: f.launcher, GroupStart: f.slurmMode == "group",
	})
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch run: %v\n", err)
	}
	pruneLogs(f, stderr)
	return res.ExitCode
}

// place reads the allocation from -H or --hostfile (or, with getenv, a
// Slurm allocation) and places the ranks on its hosts. It returns nil for
// no allocation.
func place(f *runFlags, getenv func(string) string) (*alloc.Placement, error) {
	a, err := alloc.Discover(alloc.Sources{HostList: f.hosts, Hostfile: f.hostfile, Getenv: getenv})
	if err != nil {
		return nil, err
	}
	if len(a.Hosts) == 0 {
		return nil, nil
	}
	mapBy, err := alloc.ParseMapBy(f.mapBy)
	if err != nil {
		return nil, fmt.Errorf("--map-by: %w", err)
	}
	np := f.n
	if !f.nSet {
		np = 0
	}
	if np == 0 {
		for _, h := range a.Hosts {
			np += max(h.Slots, 1)
		}
		if f.ppn > 0 {
			np = f.ppn * len(a.Hosts)
		}
	}
	return alloc.Place(a, alloc.Request{NP: np, PPN: f.ppn, MapBy: mapBy, Oversubscribe: f.oversubscribe})
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

func launchAgentMain(ctx context.Context, connect bool, stderr io.Writer) int {
	return launch.AgentMain(ctx, connect, stderr)
}
