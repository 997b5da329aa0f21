package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// The command line of `ftlaunch run`, read the way users of mpiexec (Hydra),
// Open MPI's mpirun and srun write it:
//
//   - flags take one or two dashes, and a value either as the next argument
//     or after '=' (--timeout 60, --timeout=60);
//   - a boolean flag takes an optional true or false, after '=' or as the
//     next argument (--label false is --label=false, never a program);
//   - flags end at the program; everything after it is the program's own,
//     up to a lone ':' that starts the next block of an MPMD job
//     (-n 2 ./a : -n 4 ./b), which has flags of its own (-n, --wdir, -x,
//     --env, --export) before its program;
//   - an unknown flag is an error that spells it as typed.

// appFlags is one block of the command line: its ranks, program and
// per-block settings.
type appFlags struct {
	n    int      // -n; -1 when not given
	wdir string   // --wdir ("" for the current directory)
	env  []string // -x, --env, --export settings in order: VAR or VAR=VALUE
	argv []string
	// nFlag is -n as typed, for messages.
	nFlag string
}

// runFlags are ftlaunch run's flags as parsed. It has 37 fields, over the
// project's 30, because it is one field per flag of the command line;
// grouping them would only rename flags.
type runFlags struct {
	apps []appFlags
	// n is the number of ranks: the blocks' sum, or 0 for one rank per
	// slot of the allocation (hosts or Slurm, a single block without -n).
	n    int
	nSet bool

	genv      []string // -genv settings, for every block before its own
	label     bool
	outputDir string
	killAfter time.Duration
	timeout   time.Duration
	testNodes int
	verbose   bool
	tree      string
	batch     int
	prestage  bool
	stateDir  string
	launcher  string
	// launcherSet: --launcher was given (ssh then means SSH even to
	// this machine).
	launcherSet bool
	slurmMode   string
	replicas    int
	keepLogs    int // -1: not given
	bindTo      string
	restart     recovery.Policy
	maxRestarts int
	mpi         string // --mpi: "" (PMI-1 and PMIx), "pmi1", "pmix" or "none"
	// maxRestartsSet: --max-restarts was given (it needs --restart).
	maxRestartsSet bool
	// spareNodes: the last spareNodes test nodes are spares (spares);
	// testNodes counts the others once the flags are checked.
	spareNodes int
	spareHosts []string // --spares: named spare hosts
	spares     []string

	hosts                                 []string // each -H value
	hostfile, mapBy, sshConfig, agentPath string
	ppn                                   int
	oversubscribe, acceptNew              bool
	version                               bool
	help                                  bool
}

// optKind says what an option takes.
type optKind int

const (
	optBool  optKind = iota // nothing, or true/false
	optValue                // one value
	optPair                 // VAR=VALUE, or VAR VALUE as two arguments
)

// runOption is one flag of `ftlaunch run`, under all its names (without
// dashes). set stores a value; typed is the flag as the user wrote it.
type runOption struct {
	names []string
	kind  optKind
	app   bool // a per-block flag (MPMD), set on the block being read
	set   func(f *runFlags, app *appFlags, typed, val string) error
}

// runOptions is the table of flags. Aliases are the other launchers'
// spellings (docs/guide.md, "Coming from mpiexec, mpirun or srun").
var runOptions = []runOption{
	{names: []string{"n", "np", "ntasks"}, kind: optValue, app: true, set: func(f *runFlags, a *appFlags, typed, v string) error {
		n, err := atoi(typed, v)
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", typed, n)
		}
		a.n, a.nFlag = n, typed
		return nil
	}},
	{names: []string{"wdir", "chdir", "wd", "D"}, kind: optValue, app: true, set: func(f *runFlags, a *appFlags, typed, v string) error {
		a.wdir = v
		return nil
	}},
	{names: []string{"x"}, kind: optValue, app: true, set: func(f *runFlags, a *appFlags, typed, v string) error {
		return addEnv(&a.env, typed, v)
	}},
	{names: []string{"export"}, kind: optValue, app: true, set: func(f *runFlags, a *appFlags, typed, v string) error {
		for _, item := range strings.Split(v, ",") {
			switch item {
			case "ALL":
				continue // the whole environment is passed anyway
			case "NONE":
				return fmt.Errorf("%s NONE: not supported: the ranks always get this environment (set variables with -x or --env)", typed)
			}
			if err := addEnv(&a.env, typed, item); err != nil {
				return err
			}
		}
		return nil
	}},
	{names: []string{"env"}, kind: optPair, app: true, set: func(f *runFlags, a *appFlags, typed, v string) error {
		return addEnv(&a.env, typed, v)
	}},
	{names: []string{"genv"}, kind: optPair, set: func(f *runFlags, a *appFlags, typed, v string) error {
		return addEnv(&f.genv, typed, v)
	}},
	{names: []string{"label", "l", "tag-output", "prepend-rank"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.label })},
	{names: []string{"output-dir"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		f.outputDir = v
		return nil
	}},
	{names: []string{"kill-after"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) (err error) {
		f.killAfter, err = parseSeconds(typed, v)
		return err
	}},
	{names: []string{"timeout"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) (err error) {
		f.timeout, err = parseSeconds(typed, v)
		return err
	}},
	{names: []string{"restart"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) (err error) {
		f.restart, err = recovery.ParsePolicy(v)
		if err != nil {
			return fmt.Errorf("%s %q: want none, rank or job", typed, v)
		}
		return nil
	}},
	{names: []string{"max-restarts"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("%s %q: want a number of restarts, 0 or more", typed, v)
		}
		f.maxRestarts, f.maxRestartsSet = n, true
		return nil
	}},
	{names: []string{"mpi"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		switch v {
		case "pmi1", "pmix", "none":
			f.mpi = v
		case "pmi1+pmix":
			f.mpi = ""
		default:
			return fmt.Errorf("%s %q: want pmi1, pmix or none (the default serves PMI-1 and PMIx)", typed, v)
		}
		return nil
	}},
	{names: []string{"test-nodes"}, kind: optValue, set: intSetter(func(f *runFlags) *int { return &f.testNodes })},
	{names: []string{"spare-nodes"}, kind: optValue, set: intSetter(func(f *runFlags) *int { return &f.spareNodes })},
	{names: []string{"spares"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		hosts, err := alloc.ExpandHostlist(v)
		if err != nil || len(hosts) == 0 {
			return fmt.Errorf("%s %q: want host names, comma-separated (%v)", typed, v, err)
		}
		f.spareHosts = append(f.spareHosts, hosts...)
		return nil
	}},
	{names: []string{"H", "host", "hosts"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		f.hosts = append(f.hosts, v)
		return nil
	}},
	{names: []string{"hostfile", "f", "machinefile"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		if f.hostfile != "" && f.hostfile != v {
			return fmt.Errorf("%s %s: a hostfile was given already (%s)", typed, v, f.hostfile)
		}
		f.hostfile = v
		return nil
	}},
	{names: []string{"ppn", "npernode", "perhost", "ntasks-per-node"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		n, err := atoi(typed, v)
		if err != nil {
			return err
		}
		if n < 1 {
			return fmt.Errorf("%s must be at least 1, got %d", typed, n)
		}
		f.ppn = n
		return nil
	}},
	{names: []string{"map-by"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		f.mapBy = v
		return nil
	}},
	{names: []string{"bind-to"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		switch v {
		case "none", "core", "socket":
		default:
			return fmt.Errorf("%s %q: want none, core or socket", typed, v)
		}
		f.bindTo = v
		return nil
	}},
	{names: []string{"oversubscribe"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.oversubscribe })},
	{names: []string{"ssh-config"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		f.sshConfig = v
		return nil
	}},
	{names: []string{"ssh-accept-new"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.acceptNew })},
	{names: []string{"agent-path"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		f.agentPath = v
		return nil
	}},
	{names: []string{"verbose", "v"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.verbose })},
	{names: []string{"tree"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		if _, err := plan.ParseKind(v); err != nil {
			return fmt.Errorf("%s: %w", typed, err)
		}
		f.tree = v
		return nil
	}},
	{names: []string{"batch"}, kind: optValue, set: intSetter(func(f *runFlags) *int { return &f.batch })},
	{names: []string{"prestage"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.prestage })},
	{names: []string{"state-dir"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		abs, err := filepath.Abs(v)
		if err != nil {
			return fmt.Errorf("%s: %w", typed, err)
		}
		f.stateDir = abs
		return nil
	}},
	{names: []string{"genvall", "K", "kill-on-bad-exit"}, kind: optBool, set: func(f *runFlags, a *appFlags, typed, v string) error {
		// Hydra's -genvall: the whole environment is passed anyway; srun's
		// -K: the first failure ends the job anyway.
		return nil
	}},
	{names: []string{"launcher", "bootstrap"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		switch v {
		case "fork":
			v = "local" // Hydra's name for this machine
		case "local", "ssh", "slurm":
		default:
			return fmt.Errorf("%s %q: want local, ssh or slurm", typed, v)
		}
		f.launcher, f.launcherSet = v, true
		return nil
	}},
	{names: []string{"slurm-start"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		if v != "auto" && v != "step" && v != "group" {
			return fmt.Errorf("%s %q: want auto, step or group", typed, v)
		}
		f.slurmMode = v
		return nil
	}},
	{names: []string{"replicas"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		n, err := atoi(typed, v)
		if err != nil {
			return err
		}
		if n != 1 && n != 3 && n != 5 {
			return fmt.Errorf("%s must be 1, 3 or 5, got %d", typed, n)
		}
		f.replicas = n
		return nil
	}},
	{names: []string{"keep-logs"}, kind: optValue, set: func(f *runFlags, a *appFlags, typed, v string) error {
		n, err := atoi(typed, v)
		if err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("%s must not be negative, got %d", typed, n)
		}
		f.keepLogs = n
		return nil
	}},
	{names: []string{"version"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.version })},
	{names: []string{"help", "h"}, kind: optBool, set: boolSetter(func(f *runFlags) *bool { return &f.help })},
}

// unsupported are flags of the other launchers that ftlaunch refuses with
// a reason rather than "unknown flag".
var unsupported = map[string]string{
	"N":               "srun reads it as a node count, which ftlaunch takes from the hosts (-H, --hostfile) or the Slurm allocation; --ppn sets ranks per node",
	"nodes":           "ftlaunch takes the nodes from the hosts (-H, --hostfile) or the Slurm allocation; --ppn sets ranks per node",
	"w":               "give the hosts with -H",
	"nodelist":        "give the hosts with -H",
	"genvnone":        "the ranks always get this environment; add to it with -x or -genv",
	"genvlist":        "the ranks always get this environment; add to it with -x or -genv",
	"multi-prog":      "write the blocks on the command line: -n 1 ./a : -n 3 ./b",
	"output-filename": "use --output-dir DIR (DIR/rank.R.out and .err)",
	"outfile-pattern": "use --output-dir DIR (DIR/rank.R.out and .err)",
	"errfile-pattern": "use --output-dir DIR (DIR/rank.R.out and .err)",
	"o":               "use --output-dir DIR (DIR/rank.R.out and .err)",
	"output":          "use --output-dir DIR (DIR/rank.R.out and .err)",
	"e":               "use --output-dir DIR (DIR/rank.R.out and .err)",
	"error":           "use --output-dir DIR (DIR/rank.R.out and .err)",
	"t":               "srun's time limit is in minutes; use --timeout SECONDS",
	"time":            "srun's time limit is in minutes; use --timeout SECONDS",
	"cpu-bind":        "use --bind-to none|core|socket",
	"report-bindings": "--verbose reports bindings",
	"m":               "use --map-by slot (block) or --map-by node (cyclic)",
	"distribution":    "use --map-by slot (block) or --map-by node (cyclic)",
	"c":               "ranks are not given CPU counts; use --bind-to core or socket",
	"cpus-per-task":   "ranks are not given CPU counts; use --bind-to core or socket",
	"mca":             "Open MPI's parameters: set OMPI_MCA_name with -x",
	"prefix":          "--agent-path PATH says where ftlaunch is on the hosts",
	"s":               "standard input always goes to rank 0",
	"stdin":           "standard input always goes to rank 0",
}

func boolSetter(field func(*runFlags) *bool) func(*runFlags, *appFlags, string, string) error {
	return func(f *runFlags, _ *appFlags, typed, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%s: want true or false", typed, v)
		}
		*field(f) = b
		return nil
	}
}

func intSetter(field func(*runFlags) *int) func(*runFlags, *appFlags, string, string) error {
	return func(f *runFlags, _ *appFlags, typed, v string) error {
		n, err := atoi(typed, v)
		if err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("%s must not be negative, got %d", typed, n)
		}
		*field(f) = n
		return nil
	}
}

func atoi(typed, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a whole number", typed, v)
	}
	return n, nil
}

// parseSeconds reads a time limit as Open MPI and MPIEXEC_TIMEOUT write
// it, plain seconds ("60"), or as a Go duration ("1m30s", "500ms").
func parseSeconds(typed, v string) (time.Duration, error) {
	if secs, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "eEnN") {
		if secs < 0 || secs > 1e9 {
			return 0, fmt.Errorf("%s %s: want seconds in 0..1e9", typed, v)
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want seconds (60) or a duration (1m30s)", typed, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s must not be negative, got %v", typed, d)
	}
	return d, nil
}

// addEnv appends one VAR or VAR=VALUE setting.
func addEnv(list *[]string, typed, v string) error {
	if v == "" || strings.HasPrefix(v, "=") {
		return fmt.Errorf("%s %q: want VAR or VAR=VALUE", typed, v)
	}
	*list = append(*list, v)
	return nil
}

// lookupOption finds the option named name (dashes removed).
func lookupOption(name string) *runOption {
	for i := range runOptions {
		for _, n := range runOptions[i].names {
			if n == name {
				return &runOptions[i]
			}
		}
	}
	return nil
}

// parseRunFlags reads the command line of `ftlaunch run` (getenv supplies
// MPIEXEC_TIMEOUT and SLURM_JOB_NODELIST).
func parseRunFlags(args []string, getenv func(string) string) (*runFlags, error) {
	f := &runFlags{killAfter: 5 * time.Second, tree: "auto", slurmMode: "auto", replicas: 1, keepLogs: -1, maxRestarts: 3}
	timeoutSet := false
	app := appFlags{n: -1}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == ":" {
			return nil, fmt.Errorf("':' in block %d before its program (want: -n 2 ./a : -n 4 ./b)", len(f.apps)+1)
		}
		if arg == "--" || !strings.HasPrefix(arg, "-") || arg == "-" {
			if arg == "--" {
				i++
			}
			if i == len(args) {
				break
			}
			// The program and its arguments, up to a lone ':'.
			j := i
			for j < len(args) && args[j] != ":" {
				j++
			}
			app.argv = args[i:j]
			f.apps = append(f.apps, app)
			app = appFlags{n: -1}
			if j == len(args) {
				i = j
				break
			}
			if j == len(args)-1 {
				return nil, fmt.Errorf("nothing after the last ':' (want: -n 2 ./a : -n 4 ./b)")
			}
			i = j // the loop's i++ skips the ':'
			continue
		}
		typed, val, hasVal := strings.Cut(arg, "=")
		name := strings.TrimPrefix(strings.TrimPrefix(typed, "-"), "-")
		if name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("bad flag %s", typed)
		}
		opt := lookupOption(name)
		if opt == nil {
			if why, ok := unsupported[name]; ok {
				return nil, fmt.Errorf("%s is not supported: %s", typed, why)
			}
			return nil, fmt.Errorf("unknown flag %s", typed)
		}
		switch {
		case hasVal:
		case opt.kind == optBool:
			val = "true"
			if i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false") {
				val = args[i+1]
				i++
			}
		case i+1 >= len(args):
			return nil, fmt.Errorf("%s needs a value", typed)
		case opt.kind == optPair && !strings.Contains(args[i+1], "="):
			if i+2 >= len(args) {
				return nil, fmt.Errorf("%s %s needs a value (%s VAR VALUE or %s VAR=VALUE)", typed, args[i+1], typed, typed)
			}
			val = args[i+1] + "=" + args[i+2]
			i += 2
		default:
			val = args[i+1]
			i++
		}
		if opt.kind == optPair && !strings.Contains(val, "=") {
			return nil, fmt.Errorf("%s %s: want VAR=VALUE or VAR VALUE", typed, val)
		}
		if err := opt.set(f, &app, typed, val); err != nil {
			return nil, err
		}
		if opt.names[0] == "timeout" {
			timeoutSet = true
		}
		if f.help || f.version {
			return f, nil
		}
	}
	if len(f.apps) == 0 {
		return nil, errors.New("no program given")
	}
	if err := f.check(getenv, timeoutSet); err != nil {
		return nil, err
	}
	return f, nil
}

// check validates the flags together and fills in defaults.
func (f *runFlags) check(getenv func(string) string, timeoutSet bool) error {
	if len(f.apps) > 1 {
		for i, a := range f.apps {
			if a.n < 0 {
				return fmt.Errorf("block %d (%s) has no -n: every block of an MPMD job needs its rank count", i+1, a.argv[0])
			}
		}
		if f.prestage {
			return errors.New("--prestage copies one program: not with several blocks (':')")
		}
		if f.replicas > 1 {
			return errors.New("--replicas > 1 with several blocks (':') is not supported yet")
		}
	}
	if f.maxRestartsSet && f.restart == recovery.None {
		return errors.New("--max-restarts bounds the restarts of --restart rank or job: give --restart too")
	}
	f.nSet = f.apps[0].n >= 0
	for _, a := range f.apps {
		f.n += max(a.n, 0)
	}
	if !timeoutSet {
		if s := getenv("MPIEXEC_TIMEOUT"); s != "" {
			secs, err := strconv.Atoi(s)
			if err != nil || secs < 0 {
				return fmt.Errorf("MPIEXEC_TIMEOUT=%q: want a number of seconds", s)
			}
			f.timeout = time.Duration(secs) * time.Second
		}
	}
	hasHosts := len(f.hosts) > 0 || f.hostfile != ""
	switch f.launcher {
	case "":
		switch {
		case hasHosts:
			f.launcher = "ssh"
		case getenv("SLURM_JOB_NODELIST") != "" && f.testNodes == 0:
			f.launcher = "slurm"
		default:
			f.launcher = "local"
		}
	case "local", "slurm":
		if hasHosts {
			return fmt.Errorf("--launcher %s does not take hosts (-H, --hostfile)", f.launcher)
		}
	case "ssh":
		if !hasHosts {
			return errors.New("--launcher ssh needs hosts (-H or --hostfile)")
		}
	}
	if f.launcher == "slurm" && f.testNodes > 0 {
		return errors.New("--test-nodes runs on this machine: not with --launcher slurm")
	}
	if f.testNodes > 0 && hasHosts {
		return errors.New("--test-nodes runs on this machine: give it or hosts (-H, --hostfile), not both")
	}
	if len(f.hosts) > 0 && f.hostfile != "" {
		return errors.New("both -H and --hostfile given; use one")
	}
	if f.spareNodes > 0 || len(f.spareHosts) > 0 {
		switch {
		case f.spareNodes > 0 && len(f.spareHosts) > 0:
			return errors.New("both --spare-nodes and --spares given; use one")
		case f.restart == recovery.None:
			return errors.New("spare nodes need --restart rank or job: a spare takes the place of a lost node whose ranks start again")
		case len(f.spareHosts) > 0 && f.testNodes > 0:
			return errors.New("--spares names hosts: with --test-nodes use --spare-nodes")
		case len(f.spareHosts) > 0 && !hasHosts && f.launcher != "slurm":
			return errors.New("--spares needs hosts (-H, --hostfile or a Slurm allocation) for the job")
		case f.testNodes > 0 && f.spareNodes >= f.testNodes:
			return fmt.Errorf("--spare-nodes %d of --test-nodes %d leaves no node for the job", f.spareNodes, f.testNodes)
		case f.spareNodes > 0 && f.testNodes == 0 && !hasHosts && f.launcher != "slurm":
			return errors.New("--spare-nodes needs --test-nodes or hosts (-H, --hostfile or a Slurm allocation): its last hosts are the spares")
		}
		if f.testNodes > 0 {
			// The last spareNodes test nodes are spares, started on demand.
			for i := f.testNodes - f.spareNodes; i < f.testNodes; i++ {
				f.spares = append(f.spares, "node"+strconv.Itoa(i))
			}
			f.testNodes -= f.spareNodes
		}
		// With hosts, place takes the spares out of the allocation.
	}
	_, ppn, err := alloc.ParseMapBy(f.mapBy)
	if err != nil {
		return err
	}
	if ppn > 0 {
		if f.ppn > 0 && f.ppn != ppn {
			return fmt.Errorf("--ppn %d and --map-by %s disagree", f.ppn, f.mapBy)
		}
		f.ppn = ppn
	}
	if f.n == 0 && !f.nSet && !hasHosts && f.launcher != "slurm" {
		f.n = 1
		if f.ppn > 0 {
			f.n = f.ppn * max(f.testNodes, 1) // ppn ranks on each (test) node
		}
		f.apps[0].n = f.n
	}
	return nil
}
