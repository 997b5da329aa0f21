package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/launch"
	"github.com/ftlaunch/ftlaunch/launch/alloc"
	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

const planUsage = `Usage: ftlaunch plan --nodes N [flags]
       ftlaunch plan -H HOSTS | --hostfile FILE [flags]

Builds the launch tree for N nodes (the front-end included), prints its
depth, largest fan-out and modeled launch time, and optionally simulates it.
See docs/model.md.

Tree:
  --nodes N           number of nodes, root (front-end) included (or give the hosts:)
  -H host1,host2:4    the hosts of a run: N is the front-end plus one node per host
  --hostfile FILE     the same from a hostfile, as ftlaunch run reads it (-f, -machinefile)
  --tree KIND         greedy, kary:K, 2level, binomial, flat or auto (default auto)
  --replicas R        size of the root group: 1, 3 or 5 (default 1)
Model (seconds):
  --seq S             gap between two launches started by one parent (default 0.035)
  --rem R             time of one remote launch (default 0.034)
  --batch b           leaf launchers start b children at a time (default 0: no batching)
  --batch-wait W      wait after each batch is up (needs --batch)
  --hand H            handoff: a node other than the root starts its children H after it is up
                      (its report to the root and its job coming back; default 0)
  --cores C           contention: launches share C CPUs (hosts on one machine; default 0: none)
  --work W            contention: CPU-seconds each launch takes of them (needs --cores)
  --work-after A      contention: CPU-seconds each agent takes of them once it is up (needs --cores)
  --work-per-rank P   contention: CPU-seconds more, once up, for each rank it starts (needs --cores)
  --ppn K             ranks per node, for --work-per-rank (default: the hosts' mean slots with -H or
                      --hostfile, else 1)
  --work-rate R       contention: cores each agent takes of them from being up until the launch
                      ends (needs --cores)
                      Without --seq/--rem/--cores, auto takes the kept calibration: the median
                      of the last launches' figures (and its shared CPU, if a calibration run
                      kept one), and keeps its last tree unless a new one is better by more
                      than the calibration's noise.
Simulation:
  --simulate          run the discrete-event simulator
  --rem-samples FILE  draw REM from FILE, one value in seconds per line ("kept": the agents'
                      REM samples of the kept calibration)
  --rem-median R      scale the samples so that their median is R: their spread at another REM
  --runs K            number of runs (default 100)
  --seed S            random seed (default 1)
  --concurrency C     launches one node starts at once (default 1)
Output:
  --calibrated        print the SEQ and REM measured by the last launch over SSH (kept in the
                      user's cache directory; auto uses them unless --seq/--rem are given)
  --launcher L        whose calibration: ssh (default) or slurm (launches by srun)
  --keep-shared       keep --cores, --work, --seq and --rem as the calibration's shared-CPU term
                      (what a calibration run measured: chaos/validate-model.sh), with --hand,
                      --work-after, --work-per-rank and --work-rate; --cores 0 removes it
  --fit TERM          solve the shared CPU's work or rate (TERM) so that this tree's prediction
  --measured T        is T seconds, the launch measured (needs --cores and a --tree other than
                      auto; the calibration run's inversion of the model)
  --show              print the tree with order, backup and modeled launch time
  --json              print one JSON object instead of text
  --help              print this help
`

// planOptions are the parsed flags of `ftlaunch plan`.
type planOptions struct {
	nodes       int
	hostfile    string // see nodeCount
	hosts       string
	tree        string
	seq, rem    float64
	replicas    int
	batch       int
	batchWait   float64
	show, json  bool
	calibrated  bool
	launcher    string
	simulate    bool
	remSamples  string
	runs        int
	seed        uint64
	concurrency int
	cores       int
	work        float64
	workAfter   float64
	workPerRank float64
	ppn         float64
	workRate    float64
	fit         string
	measured    float64
	keepShared  bool
	remMedian   float64
	hand        float64
	set         map[string]bool // flags given on the command line
}

// planUsageError is a bad invocation: one line on stderr, exit status 2.
type planUsageError struct{ msg string }

func (e *planUsageError) Error() string { return e.msg }

func usageErrorf(format string, a ...any) error {
	return &planUsageError{msg: fmt.Sprintf(format, a...)}
}

// planCommand runs `ftlaunch plan ARGS`, writing the report to stdout and
// errors to stderr, and returns the exit status: 0 on success, 2 for a bad
// invocation or bad input, 1 if the output cannot be written.
func planCommand(args []string, stdout, stderr io.Writer) int {
	opts, err := parsePlanFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, planUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 2
	}
	if opts.calibrated {
		return showCalibration(stdout, stderr, opts.launcher)
	}
	if opts.keepShared {
		return keepShared(stdout, stderr, opts)
	}
	rep, err := buildPlanReport(context.Background(), opts)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 2
	}
	if opts.json {
		err = writePlanJSON(stdout, rep)
	} else {
		err = writePlanText(stdout, rep, opts.show)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: write output: %v\n", err)
		return 1
	}
	return 0
}

func parsePlanFlags(args []string) (*planOptions, error) {
	o := &planOptions{}
	fs := flag.NewFlagSet("ftlaunch plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.nodes, "nodes", 0, "")
	fs.StringVar(&o.hostfile, "hostfile", "", "")
	fs.StringVar(&o.hostfile, "f", "", "")
	fs.StringVar(&o.hostfile, "machinefile", "", "")
	fs.StringVar(&o.hosts, "H", "", "")
	fs.StringVar(&o.hosts, "host", "", "")
	fs.StringVar(&o.hosts, "hosts", "", "")
	fs.StringVar(&o.tree, "tree", "auto", "")
	fs.Float64Var(&o.seq, "seq", plan.DefaultSeq, "")
	fs.Float64Var(&o.rem, "rem", plan.DefaultRem, "")
	fs.IntVar(&o.replicas, "replicas", 1, "")
	fs.IntVar(&o.batch, "batch", 0, "")
	fs.Float64Var(&o.batchWait, "batch-wait", 0, "")
	fs.BoolVar(&o.show, "show", false, "")
	fs.BoolVar(&o.calibrated, "calibrated", false, "")
	fs.StringVar(&o.launcher, "launcher", "ssh", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.BoolVar(&o.simulate, "simulate", false, "")
	fs.StringVar(&o.remSamples, "rem-samples", "", "")
	fs.IntVar(&o.runs, "runs", 100, "")
	fs.Uint64Var(&o.seed, "seed", 1, "")
	fs.IntVar(&o.concurrency, "concurrency", 1, "")
	fs.IntVar(&o.cores, "cores", 0, "")
	fs.Float64Var(&o.work, "work", 0, "")
	fs.Float64Var(&o.workAfter, "work-after", 0, "")
	fs.Float64Var(&o.workPerRank, "work-per-rank", 0, "")
	fs.Float64Var(&o.ppn, "ppn", 1, "")
	fs.Float64Var(&o.workRate, "work-rate", 0, "")
	fs.StringVar(&o.fit, "fit", "", "")
	fs.Float64Var(&o.measured, "measured", 0, "")
	fs.BoolVar(&o.keepShared, "keep-shared", false, "")
	fs.Float64Var(&o.remMedian, "rem-median", 0, "")
	fs.Float64Var(&o.hand, "hand", 0, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageErrorf("%v (see ftlaunch plan --help)", err)
	}
	if fs.NArg() > 0 {
		return nil, usageErrorf("unexpected argument %q (see ftlaunch plan --help)", fs.Arg(0))
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if o.launcher != "ssh" && o.launcher != "slurm" {
		return nil, usageErrorf("--launcher %q: want ssh or slurm", o.launcher)
	}
	if o.calibrated && (len(o.set) == 1 || len(o.set) == 2 && o.set["launcher"]) {
		return o, nil // --calibrated alone shows the calibration
	}
	switch {
	case o.cores < 0:
		return nil, usageErrorf("--cores must be >= 0 (got %d)", o.cores)
	case o.work < 0 || o.work != o.work || o.work > 1e9:
		return nil, usageErrorf("--work must be a number of seconds in [0, 1e9] (got %v)", o.work)
	case o.set["work"] && o.cores == 0:
		return nil, usageErrorf("--work needs --cores")
	case o.workAfter < 0 || o.workAfter != o.workAfter || o.workAfter > 1e9:
		return nil, usageErrorf("--work-after must be a number of seconds in [0, 1e9] (got %v)", o.workAfter)
	case o.set["work-after"] && o.cores == 0:
		return nil, usageErrorf("--work-after needs --cores")
	case o.workPerRank < 0 || o.workPerRank != o.workPerRank || o.workPerRank > 1e9:
		return nil, usageErrorf("--work-per-rank must be a number of seconds in [0, 1e9] (got %v)", o.workPerRank)
	case o.set["work-per-rank"] && o.cores == 0:
		return nil, usageErrorf("--work-per-rank needs --cores")
	case !(o.ppn >= 1) || o.ppn > alloc.MaxSlots:
		return nil, usageErrorf("--ppn must be a number of ranks in [1, %d] (got %v)", alloc.MaxSlots, o.ppn)
	case o.workRate < 0 || o.workRate != o.workRate || o.workRate > 1e9:
		return nil, usageErrorf("--work-rate must be a number of cores in [0, 1e9] (got %v)", o.workRate)
	case o.set["work-rate"] && o.cores == 0:
		return nil, usageErrorf("--work-rate needs --cores")
	case o.fit != "" && o.fit != plan.FitWork && o.fit != plan.FitRate:
		return nil, usageErrorf("--fit %q: want %s or %s", o.fit, plan.FitWork, plan.FitRate)
	case o.fit != "" && (o.cores == 0 || !(o.measured > 0) || o.measured > 1e9 || o.tree == "auto" || o.keepShared):
		return nil, usageErrorf("--fit needs --cores, --measured T (seconds > 0) and a --tree other than auto")
	case o.set["measured"] && o.fit == "":
		return nil, usageErrorf("--measured needs --fit")
	case o.cores > 0 && o.batch > 0:
		return nil, usageErrorf("--batch with --cores is not modeled")
	case o.keepShared && o.cores > 0 && (!o.set["work"] || !o.set["seq"] || !o.set["rem"]):
		return nil, usageErrorf("--keep-shared needs --cores, --work, --seq and --rem, and takes --hand (what the calibration run measured)")
	case o.keepShared && (o.hand < 0 || o.hand != o.hand || o.hand > 1e9):
		return nil, usageErrorf("--hand must be a number of seconds in [0, 1e9] (got %v)", o.hand)
	case o.keepShared:
		return o, nil
	}

	n, err := nodeCount(o)
	if err != nil {
		return nil, err
	}
	o.nodes = n
	for _, c := range []struct {
		name string
		v    float64
	}{{"seq", o.seq}, {"rem", o.rem}, {"batch-wait", o.batchWait}, {"hand", o.hand}} {
		if c.v < 0 || c.v != c.v || c.v > 1e9 {
			return nil, usageErrorf("--%s must be a number of seconds in [0, 1e9] (got %v)", c.name, c.v)
		}
	}
	switch {
	case o.replicas < 1:
		return nil, usageErrorf("--replicas must be >= 1 (got %d)", o.replicas)
	case o.batch < 0:
		return nil, usageErrorf("--batch must be >= 0 (got %d)", o.batch)
	case o.set["batch-wait"] && o.batch == 0:
		return nil, usageErrorf("--batch-wait needs --batch")
	case o.runs < 1:
		return nil, usageErrorf("--runs must be >= 1 (got %d)", o.runs)
	case o.concurrency < 1:
		return nil, usageErrorf("--concurrency must be >= 1 (got %d)", o.concurrency)
	}
	if o.set["rem-median"] && (o.remSamples == "" || !(o.remMedian > 0) || o.remMedian > 1e9) {
		return nil, usageErrorf("--rem-median needs --rem-samples and a number of seconds > 0 (got %v)", o.remMedian)
	}
	if o.cores > 0 && o.concurrency > 1 {
		return nil, usageErrorf("--concurrency with --cores is not modeled")
	}
	if !o.simulate {
		for _, name := range []string{"rem-samples", "rem-median", "runs", "seed", "concurrency"} {
			if o.set[name] {
				return nil, usageErrorf("--%s needs --simulate", name)
			}
		}
	}
	return o, nil
}

// showCalibration prints the kept calibration, or says there is none.
func showCalibration(stdout, stderr io.Writer, launcher string) int {
	p, err := launch.CalibrationPath(launcher)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 1
	}
	c, err := launch.LoadCalibration(launcher)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 1
	}
	if c == nil {
		fmt.Fprintf(stdout, "no calibration yet (%s): the auto tree uses SEQ %.3f s, REM %.3f s; a launch by %s measures them\n",
			p, plan.DefaultSeq, plan.DefaultRem, launcher)
		return 0
	}
	fmt.Fprintf(stdout, "seq       %.4f s (p50; p25-p75 %.4f-%.4f s)\nrem       %.4f s (p50; p25-p75 %.4f-%.4f s)\nhandoff   %.4f s (p50 of the launches that measured one)\nlaunches  %d (noise %.0f %%), %d agents' REM samples\nagents    %d (the last launch)\nmeasured  %s\n",
		c.Seq, c.SeqQuantile(0.25), c.SeqQuantile(0.75), c.Rem, c.RemQuantile(0.25), c.RemQuantile(0.75), c.HandQuantile(0.5),
		max(len(c.Window), 1), 100*c.Noise(), len(c.RemSamples), c.Agents, c.Measured.Format("2006-01-02 15:04:05 UTC"))
	if s := c.Shared; s != nil {
		fmt.Fprintf(stdout, "shared    %d cores, %.4f s of CPU each launch, %.4f s each agent once up and %.4f s each rank it starts, %.4f cores each agent up until the launch ends; uncontended seq %.4f s, rem %.4f s, handoff %.4f s (a calibration run of %s)\n",
			s.Cores, s.Work, s.After, s.PerRank, s.Rate, s.Seq, s.Rem, s.Hand, s.Measured.Format("2006-01-02 15:04:05 UTC"))
	}
	if a := c.Auto; a != nil {
		fmt.Fprintf(stdout, "auto      %s for %d nodes (its last choice)\n", plan.Choice{Tree: a.Tree, Seq: a.Seq, Rem: a.Rem}, a.Nodes)
	}
	fmt.Fprintf(stdout, "file      %s\n", p)
	return 0
}

// keepShared keeps the calibration run's shared-CPU term (or, with
// --cores 0, removes it).
func keepShared(stdout, stderr io.Writer, o *planOptions) int {
	c, err := launch.LoadCalibration(o.launcher)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 1
	}
	if c == nil {
		if o.cores == 0 {
			return 0
		}
		// No launch yet: the run's figures stand for the window too.
		c = &launch.Calibration{Seq: o.seq, Rem: o.rem}
	}
	c.Shared = nil
	if o.cores > 0 {
		s := o.term()
		s.Measured = time.Now().UTC()
		c.Shared = &s
	}
	p, err := calibrate.SaveCalibration(o.launcher, *c)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch plan: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "kept in %s\n", p)
	return 0
}

// nodeCount returns the number of nodes the plan covers: --nodes, or with
// --hostfile / -H the front-end plus one node per host of the allocation.
func nodeCount(o *planOptions) (int, error) {
	if o.hostfile != "" || o.hosts != "" {
		if o.set["nodes"] {
			return 0, usageErrorf("give either --nodes or --hostfile / -H, not both")
		}
		a, err := alloc.Discover(alloc.Sources{HostList: o.hosts, Hostfile: o.hostfile})
		if err != nil {
			return 0, usageErrorf("%v", err)
		}
		if !o.set["ppn"] && len(a.Hosts) > 0 {
			slots := 0
			for _, h := range a.Hosts {
				slots += h.Slots
			}
			o.ppn = float64(slots) / float64(len(a.Hosts))
		}
		return len(a.Hosts) + 1, nil
	}
	if o.nodes < 1 {
		if o.nodes == 0 {
			return 0, usageErrorf("--nodes N is required (N >= 1, the front-end included)")
		}
		return 0, usageErrorf("--nodes must be >= 1 (got %d)", o.nodes)
	}
	if o.nodes > plan.MaxNodes {
		return 0, usageErrorf("--nodes must be <= %d (got %d)", plan.MaxNodes, o.nodes)
	}
	return o.nodes, nil
}

// planReport is what `ftlaunch plan` prints; its JSON form is the --json
// output.
type planReport struct {
	Tree         string  `json:"tree"`
	ShapeSeq     float64 `json:"shape_seq,omitempty"`
	ShapeRem     float64 `json:"shape_rem,omitempty"`
	Nodes        int     `json:"nodes"`
	Seq          float64 `json:"seq"`
	Rem          float64 `json:"rem"`
	Batch        int     `json:"batch"`
	BatchWait    float64 `json:"batch_wait"`
	Replicas     int     `json:"replicas"`
	ReplicaNodes []int32 `json:"replica_nodes"`
	Depth        int     `json:"depth"`
	MaxChildren  int     `json:"max_children"`
	MaxFostered  int     `json:"max_fostered"`
	Modeled      float64 `json:"modeled_seconds"`
	// Cores and Work are the contention term (0: none); Predicted is the
	// launch's forecast with it (Modeled without one).
	Cores     int     `json:"cores,omitempty"`
	Work      float64 `json:"work_seconds,omitempty"`
	WorkAfter float64 `json:"work_after_seconds,omitempty"` // per agent, its ranks' start included
	// WorkPerRank is the part of WorkAfter each of its ranks takes.
	WorkPerRank float64 `json:"work_per_rank_seconds,omitempty"`
	WorkRate    float64 `json:"work_rate,omitempty"`
	Hand        float64 `json:"hand_seconds,omitempty"`
	Predicted   float64 `json:"predicted_seconds"`
	// AutoChose is the tree auto chose (the kind's name), AutoWhy why it
	// kept or changed its last one.
	AutoChose   string      `json:"auto_chose,omitempty"`
	AutoWhy     string      `json:"auto_why,omitempty"`
	Calibration *calReport  `json:"calibration,omitempty"`
	Fit         *fitReport  `json:"fit,omitempty"`
	Simulation  *simReport  `json:"simulation,omitempty"`
	Plan        *planArrays `json:"plan,omitempty"`
	pl          *plan.Plan
	launchTimes []float64
}

// calReport says which kept calibration the plan took: the quantile of
// its window, the window's size, REM's spread and the noise it implies.
type calReport struct {
	Quantile float64 `json:"quantile"`
	Launches int     `json:"launches"`
	RemP25   float64 `json:"rem_p25"`
	RemP75   float64 `json:"rem_p75"`
	Noise    float64 `json:"noise"`
	Samples  int     `json:"rem_samples"`
	Shared   bool    `json:"shared"`
}

// fitReport is what --fit solved: the term's value at which the tree's
// prediction is the measured time (or as near as the term gets it).
type fitReport struct {
	Term      string  `json:"term"`
	Value     float64 `json:"value"`
	Measured  float64 `json:"measured_seconds"`
	Predicted float64 `json:"predicted_seconds"`
}

type simReport struct {
	Runs        int     `json:"runs"`
	Seed        uint64  `json:"seed"`
	Concurrency int     `json:"concurrency"`
	RemSamples  string  `json:"rem_samples,omitempty"`
	RemMedian   float64 `json:"rem_median,omitempty"`
	Median      float64 `json:"median_seconds"`
	P95         float64 `json:"p95_seconds"`
	P99         float64 `json:"p99_seconds"`
	Min         float64 `json:"min_seconds"`
	Max         float64 `json:"max_seconds"`
	Mean        float64 `json:"mean_seconds"`
}

// planArrays is the tree itself, printed with --json --show.
type planArrays struct {
	Parent []int32 `json:"parent"`
	Order  []int32 `json:"order"`
	Backup []int32 `json:"backup"`
}

func buildPlanReport(ctx context.Context, o *planOptions) (*planReport, error) {
	kind, err := plan.ParseKind(o.tree)
	if err != nil {
		return nil, fmt.Errorf("--tree: %w", err)
	}
	params := plan.Params{Seq: o.seq, Rem: o.rem, Replicas: o.replicas}
	var kept *launch.Calibration
	noise := calibrate.MinNoise
	var prev *plan.Choice
	switch {
	case kind.Shape == plan.Auto && (o.set["seq"] || o.set["rem"] || o.set["cores"] || o.set["hand"]):
		// Explicit figures are a calibration.
		params.Calibration = &plan.Calibration{Seq: o.seq, Rem: o.rem}
	case kind.Shape == plan.Auto:
		// The kept calibration, if any: the window's medians, or a
		// calibration run's shared-CPU term.
		c, err := launch.LoadCalibration(o.launcher)
		if err != nil {
			return nil, err
		}
		if c != nil {
			kept, noise = c, c.Noise()
			o.seq, o.rem, o.hand = c.SeqQuantile(0.5), c.RemQuantile(0.5), c.HandQuantile(0.5)
			if s := c.Shared; s != nil {
				o.seq, o.rem, o.hand, o.cores, o.work, o.workAfter, o.workPerRank, o.workRate = s.Seq, s.Rem, s.Hand, s.Cores, s.Work, s.After, s.PerRank, s.Rate
			}
			params.Seq, params.Rem = o.seq, o.rem
			params.Calibration = &plan.Calibration{Seq: o.seq, Rem: o.rem}
			if a := c.Auto; a != nil && a.Nodes == o.nodes {
				prev = &plan.Choice{Tree: a.Tree, Seq: a.Seq, Rem: a.Rem}
			}
		}
	}
	forecast := plan.Forecast{Seq: o.seq, Rem: o.rem, Hand: o.hand, Shared: o.shared()}
	var pl *plan.Plan
	why := ""
	if kind.Shape == plan.Auto {
		ch, err := plan.ChooseAuto(o.nodes, forecast, params, prev, noise)
		if err != nil {
			return nil, err
		}
		pl, why = ch.Plan, ch.Why
	} else if pl, err = plan.Build(kind, o.nodes, params); err != nil {
		return nil, err
	}
	var fit *fitReport
	if o.fit != "" {
		v, p, err := pl.Fit(forecast, o.fit, o.measured)
		if err != nil {
			return nil, err
		}
		fit = &fitReport{Term: o.fit, Value: v, Measured: o.measured, Predicted: p}
		if o.fit == plan.FitWork {
			o.work = v
		} else {
			o.workRate = v
		}
		forecast.Shared = o.shared()
	}
	predicted, err := pl.Predict(forecast)
	if err != nil {
		return nil, err
	}
	model := plan.Model{Seq: o.seq, Rem: o.rem, Batch: o.batch, BatchWait: o.batchWait}
	times, err := pl.LaunchTimes(model)
	if err != nil {
		return nil, err
	}
	rep := &planReport{
		Tree: kind.String(), ShapeSeq: pl.Seq, ShapeRem: pl.Rem,
		Nodes: pl.N(), Seq: o.seq, Rem: o.rem, Batch: o.batch, BatchWait: o.batchWait,
		Replicas: len(pl.ReplicaNodes), ReplicaNodes: pl.ReplicaNodes,
		Depth: pl.Depth(), MaxChildren: pl.MaxChildren(), MaxFostered: maxFostered(pl),
		Cores: o.cores, Work: o.work, WorkAfter: o.shared().After, WorkPerRank: o.workPerRank, WorkRate: o.workRate, Hand: o.hand, Predicted: predicted, AutoChose: pl.Kind.String(), AutoWhy: why,
		Fit: fit, pl: pl, launchTimes: times,
	}
	if kind.Shape != plan.Auto {
		rep.AutoChose = ""
	}
	if kept != nil {
		rep.Calibration = &calReport{Quantile: 0.5, Launches: max(len(kept.Window), 1), RemP25: kept.RemQuantile(0.25), RemP75: kept.RemQuantile(0.75),
			Noise: noise, Samples: len(kept.RemSamples), Shared: kept.Shared != nil}
	}
	for _, t := range times {
		rep.Modeled = max(rep.Modeled, t)
	}
	if o.show {
		rep.Plan = &planArrays{Parent: pl.Parent, Order: pl.Order, Backup: pl.Backup}
	}
	if o.simulate {
		rem := plan.RemDist{Const: o.rem}
		switch o.remSamples {
		case "":
		case "kept":
			c, err := launch.LoadCalibration(o.launcher)
			if err != nil {
				return nil, err
			}
			if c == nil || len(c.RemSamples) == 0 {
				return nil, errors.New("--rem-samples kept: no REM samples kept yet (a launch over SSH keeps them)")
			}
			rem = plan.RemDist{Samples: c.RemSamples}
		default:
			if rem, err = plan.LoadRemSamples(o.remSamples); err != nil {
				return nil, fmt.Errorf("--rem-samples: %w", err)
			}
		}
		if o.remMedian > 0 {
			f := o.remMedian / calibrate.Quantile(rem.Samples, 0.5)
			scaled := make([]float64, len(rem.Samples))
			for i, x := range rem.Samples {
				scaled[i] = x * f
			}
			rem.Samples = scaled
		}
		res, err := plan.Simulate(ctx, pl, plan.SimConfig{
			Seq: o.seq, Rem: rem, Concurrency: o.concurrency,
			Batch: o.batch, BatchWait: o.batchWait, Runs: o.runs, Seed: o.seed,
			Hand: o.hand, Shared: o.shared(),
		})
		if err != nil {
			return nil, err
		}
		rep.Simulation = &simReport{
			Runs: res.Runs, Seed: o.seed, Concurrency: o.concurrency, RemSamples: o.remSamples, RemMedian: o.remMedian,
			Median: res.Median, P95: res.P95, P99: res.P99, Min: res.Min, Max: res.Max, Mean: res.Mean,
		}
	}
	return rep, nil
}

// term is the contention term the flags (or the kept calibration) give,
// as a calibration run keeps it.
func (o *planOptions) term() calibrate.Shared {
	return calibrate.Shared{Cores: o.cores, Work: o.work, After: o.workAfter, PerRank: o.workPerRank, Rate: o.workRate, Seq: o.seq, Rem: o.rem, Hand: o.hand}
}

// shared is the term as the model takes it for --ppn ranks per node
// (calibrate.Shared.Plan: an agent's work once up holds its ranks' start).
func (o *planOptions) shared() plan.Shared {
	t := o.term()
	return t.Plan(o.ppn)
}

// maxFostered returns the largest number of nodes that name one node as
// their backup parent (the root group not counted).
func maxFostered(pl *plan.Plan) int {
	count := make([]int32, pl.N())
	most := int32(0)
	for _, b := range pl.Backup {
		if b >= 0 {
			count[b]++
			most = max(most, count[b])
		}
	}
	return int(most)
}

func writePlanJSON(w io.Writer, rep *planReport) error {
	return json.NewEncoder(w).Encode(rep)
}

func seconds(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) + " s" }

func nodeName(v int32) string {
	switch v {
	case plan.BackupRootGroup:
		return "root-group"
	case plan.NoNode:
		return "-"
	}
	return strconv.Itoa(int(v))
}

// maxIndent caps the indentation of --show so that a chain-shaped tree
// does not print quadratic output; deeper nodes carry their depth.
const maxIndent = 32

func writePlanText(w io.Writer, rep *planReport, show bool) error {
	pl := rep.pl
	var b strings.Builder
	if show {
		replica := map[int32]int{}
		for r, v := range pl.ReplicaNodes {
			replica[v] = r
		}
		stack := []int32{0}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			d := pl.NodeDepth(int(v))
			b.WriteString(strings.Repeat("  ", min(d, maxIndent)))
			if d > maxIndent {
				fmt.Fprintf(&b, "[depth %d] ", d)
			}
			if v == 0 {
				b.WriteString("0 root")
			} else {
				fmt.Fprintf(&b, "%d order %d backup %s", v, pl.Order[v], nodeName(pl.Backup[v]))
			}
			if r, ok := replica[v]; ok {
				fmt.Fprintf(&b, " replica %d", r)
			}
			fmt.Fprintf(&b, " up %s\n", seconds(rep.launchTimes[v]))
			cs := pl.Children(int(v))
			for i := len(cs) - 1; i >= 0; i-- {
				stack = append(stack, cs[i])
			}
			if b.Len() > 1<<16 {
				if _, err := io.WriteString(w, b.String()); err != nil {
					return err
				}
				b.Reset()
			}
		}
	}
	tree := rep.Tree
	if rep.ShapeSeq != 0 || rep.ShapeRem != 0 {
		tree += fmt.Sprintf(" (shaped by seq %s, rem %s)", seconds(rep.ShapeSeq), seconds(rep.ShapeRem))
	}
	if rep.AutoChose != "" && rep.AutoChose != "auto" {
		tree += " chose " + rep.AutoChose
	}
	fmt.Fprintf(&b, "tree          %s\n", tree)
	fmt.Fprintf(&b, "nodes         %d\n", rep.Nodes)
	reps := make([]string, len(rep.ReplicaNodes))
	for i, v := range rep.ReplicaNodes {
		reps[i] = strconv.Itoa(int(v))
	}
	fmt.Fprintf(&b, "replicas      %d on node %s\n", rep.Replicas, strings.Join(reps, ", "))
	fmt.Fprintf(&b, "depth         %d\n", rep.Depth)
	fmt.Fprintf(&b, "max fan-out   %d\n", rep.MaxChildren)
	fmt.Fprintf(&b, "max fostered  %d\n", rep.MaxFostered)
	model := fmt.Sprintf("seq %s, rem %s", seconds(rep.Seq), seconds(rep.Rem))
	if rep.Batch > 0 {
		model += fmt.Sprintf(", batch %d, batch wait %s", rep.Batch, seconds(rep.BatchWait))
	}
	fmt.Fprintf(&b, "modeled       %s (%s)\n", seconds(rep.Modeled), model)
	switch {
	case rep.Cores > 0:
		fmt.Fprintf(&b, "predicted     %s (handoff %s; %d shared cores, %s of CPU each launch, %s each agent once up, %.4f cores each agent up until the launch ends)\n",
			seconds(rep.Predicted), seconds(rep.Hand), rep.Cores, seconds(rep.Work), seconds(rep.WorkAfter), rep.WorkRate)
	case rep.Hand > 0:
		fmt.Fprintf(&b, "predicted     %s (handoff %s)\n", seconds(rep.Predicted), seconds(rep.Hand))
	}
	if c := rep.Calibration; c != nil {
		fmt.Fprintf(&b, "calibration   p%.0f of %d launch(es), rem p25-p75 %s-%s, noise %.0f %%", 100*c.Quantile, c.Launches, seconds(c.RemP25), seconds(c.RemP75), 100*c.Noise)
		if c.Shared {
			b.WriteString("; seq, rem and the shared CPU from the calibration run")
		}
		b.WriteString("\n")
	}
	if rep.AutoWhy != "" {
		fmt.Fprintf(&b, "auto          %s\n", rep.AutoWhy)
	}
	if f := rep.Fit; f != nil {
		fmt.Fprintf(&b, "fit           %s %.5f (predicted %s for %s measured)\n", f.Term, f.Value, seconds(f.Predicted), seconds(f.Measured))
	}
	if s := rep.Simulation; s != nil {
		src := "constant rem"
		if s.RemSamples != "" {
			src = "rem from " + s.RemSamples
		}
		if s.RemMedian > 0 {
			src += fmt.Sprintf(" scaled to a median of %s", seconds(s.RemMedian))
		}
		fmt.Fprintf(&b, "simulated     median %s, p95 %s, p99 %s, min %s, max %s (%d runs, seed %d, concurrency %d, %s)\n",
			seconds(s.Median), seconds(s.P95), seconds(s.P99), seconds(s.Min), seconds(s.Max), s.Runs, s.Seed, s.Concurrency, src)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
