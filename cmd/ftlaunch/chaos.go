package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

const chaosUsage = `Usage: ftlaunch chaos --cluster test-nodes|emulated [flags] [-- APP-ARGS...]

Runs a job K times (trials) under a seeded schedule of faults applied from
outside (signals; on the emulated cluster also host crashes, link cuts and
slow links), then checks that each job ended as promised: with no
restart, any failure ends the job cleanly naming the fault; with --restart
rank or job, a rank's loss is recovered and the job completes with the
right result, and so is a lost agent wherever it is in the tree (the
agents below it move to their backup parents): a SIGKILLed one on its
node, a stopped, crashed or cut-off one on a spare node (--spare-nodes)
while one is left (else the job ends naming it); a lost front-end with
one replica leaves no process and the status "unfinished", and with
--replicas 3 a lost front-end's job goes on and completes. After every
trial it checks the invariants: the final status, no process of the job
left (on every emulated host too), nothing of a lost agent incarnation
left once the job ended or once it ran again, every failure in the state log paired
with the job's end (and under a restart policy, with a recovery that ran
to its end), equal digests on the replicas that stayed up, monotonic
epochs and node-table versions, the state log's own invariants, no output
line written twice, and the application's result. The last line is "N
passed, M failed"; the exit status is 1 when a trial failed. A failing
trial keeps its directory (state log, the front-end's output) and prints
the command that replays it.

  --cluster test-nodes|emulated
                           where the trials run (required): test-nodes (local agents),
                           or emulated: N hosts in network namespaces with a real sshd
                           each, brought up for the run and down at its end (needs root);
                           the jobs run over SSH from this machine
  --cluster-name NAME, --cluster-prefix NET
                           the emulated cluster's name and network (default ftchaos,
                           10.79.0.0/24); a cluster of that name left by a crashed run
                           is removed first
  --nodes N                agents (test nodes, or emulated hosts) per job (default 6)
  --ppn N                  ranks per node (default 2)
  --trials K               trials (default 10)
  --seed S                 the first trial's seed (default: from the clock, printed);
                           --seed S --trials 1 replays a trial printed with seed S
  --faults LIST            any of rank,agent,leaf,interior,root,replica,node,partition,
                           stop,slow (default: every fault with a target in the plan);
                           node (a host crashes: link down, every process killed) and
                           partition (its link cut until the trial is over; under a
                           restart policy healed 3x its detection time after the cut)
                           need the emulated cluster, where slow is a slow link (150 ms
                           on every packet into the host for 1.5 s); stop continues the
                           agent 3x its detection time after the SIGSTOP
  --when launch|run|recovery|any
                           when faults fall (default any: launch or run, chosen per
                           trial); recovery: a rank is killed in the run, and the faults
                           fall once the job's live report shows the recovery under way
                           (needs --restart rank or job)
  --concurrent 1|2         faults per trial (default 1)
  --restart none|rank|job  the job's restart policy (default none); under rank and job the
                           default application is the recovery application
                           ("ftlaunch ringapp", about 2 s) and run-phase faults fall
                           after the first node table
  --replicas R             root replicas: 1, 3 or 5 (default 1)
  --spare-nodes K          K spare nodes beside the --nodes (test nodes, or emulated hosts
                           brought up with the others), passed to the job: a silent
                           node's agent starts on the next (needs --restart rank or job)
  --tree KIND              the launch tree (default kary:2, so there are interior agents;
                           any kind but auto)
  --app PATH               the application (default: ftlaunch's own, "ftlaunch chaos app",
                           or "ftlaunch ringapp" under a restart policy); arguments after
                           -- are its own
  --steps S, --interval D  the default application's length: S steps of D (default 20 x 100ms;
                           the ring application takes 10 steps of D/10 for each)
  --out DIR                where the run makes its directory (ftlaunch-chaos-*) for its trials
                           (default: the temporary directory)
  --keep                   keep every trial's directory, not only the failing ones'
  --strict                 fail the trials that pass only by a known limit (docs/chaos.md)
  --trial-timeout D        give up on a trial after D (default 2m)
`

// chaosOptions are the flags of one chaos run.
type chaosOptions struct {
	cluster       string
	clusterName   string
	clusterPrefix string
	nodes, ppn    int
	trials        int
	seed          uint64
	seedSet       bool
	faults        string
	when          string
	concurrent    int
	restart       string
	replicas      int
	spareNodes    int
	tree          string
	app           string
	appArgs       []string
	steps         int
	interval      time.Duration
	out           string
	keep          bool
	strict        bool
	trialLimit    time.Duration
	parsedFault   []trial.Fault
	phase         trial.Phase
	policy        trial.Policy
}

func parseChaosFlags(args []string) (*chaosOptions, error) {
	o := &chaosOptions{}
	fs := flag.NewFlagSet("ftlaunch chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.cluster, "cluster", "", "")
	fs.StringVar(&o.clusterName, "cluster-name", chaosClusterName, "")
	fs.StringVar(&o.clusterPrefix, "cluster-prefix", chaosClusterPrefix, "")
	fs.IntVar(&o.nodes, "nodes", 6, "")
	fs.IntVar(&o.ppn, "ppn", 2, "")
	fs.IntVar(&o.trials, "trials", 10, "")
	seed := fs.String("seed", "", "")
	fs.StringVar(&o.faults, "faults", "", "")
	fs.StringVar(&o.when, "when", "any", "")
	fs.IntVar(&o.concurrent, "concurrent", 1, "")
	fs.StringVar(&o.restart, "restart", "none", "")
	fs.IntVar(&o.replicas, "replicas", 1, "")
	fs.IntVar(&o.spareNodes, "spare-nodes", 0, "")
	fs.StringVar(&o.tree, "tree", "kary:2", "")
	fs.StringVar(&o.app, "app", "", "")
	fs.IntVar(&o.steps, "steps", 20, "")
	fs.DurationVar(&o.interval, "interval", 100*time.Millisecond, "")
	fs.StringVar(&o.out, "out", "", "")
	fs.BoolVar(&o.keep, "keep", false, "")
	fs.BoolVar(&o.strict, "strict", false, "")
	fs.DurationVar(&o.trialLimit, "trial-timeout", 2*time.Minute, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.appArgs = fs.Args()
	if len(o.appArgs) > 0 && o.app == "" {
		return nil, fmt.Errorf("unexpected argument %q (application arguments need --app)", o.appArgs[0])
	}
	switch trial.Cluster(o.cluster) {
	case trial.TestNodes:
	case trial.Emulated:
		if p, err := netip.ParsePrefix(o.clusterPrefix); err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("--cluster-prefix %q: want an IPv4 network, e.g. %s", o.clusterPrefix, chaosClusterPrefix)
		}
		if os.Geteuid() != 0 {
			return nil, errors.New("--cluster emulated needs root (network namespaces, links, sshd): run it as root, or use --cluster test-nodes")
		}
	case "":
		return nil, errors.New("--cluster is required: test-nodes or emulated")
	default:
		return nil, fmt.Errorf("--cluster %q: want test-nodes or emulated", o.cluster)
	}
	policy, perr := trial.ParsePolicy(o.restart)
	if perr != nil {
		return nil, perr
	}
	o.policy = policy
	if o.nodes < 1 || o.ppn < 1 || o.trials < 1 || o.steps < 1 || o.interval <= 0 {
		return nil, errors.New("--nodes, --ppn, --trials, --steps and --interval must be positive")
	}
	if o.replicas != 1 && o.replicas != 3 && o.replicas != 5 {
		return nil, fmt.Errorf("--replicas must be 1, 3 or 5, got %d", o.replicas)
	}
	if o.spareNodes < 0 {
		return nil, fmt.Errorf("--spare-nodes %d: want 0 or more", o.spareNodes)
	}
	if o.spareNodes > 0 && policy == trial.NoRestart {
		return nil, errors.New("--spare-nodes needs --restart rank or job: a spare takes the place of a lost node whose ranks start again")
	}
	if o.replicas > 1 && o.nodes < o.replicas-1 {
		return nil, fmt.Errorf("--replicas %d needs at least %d nodes", o.replicas, o.replicas-1)
	}
	if *seed != "" {
		s, err := strconv.ParseUint(*seed, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("--seed %q: want an unsigned integer", *seed)
		}
		o.seed, o.seedSet = s, true
	}
	var err error
	if o.parsedFault, err = trial.ParseFaults(o.faults); err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	if o.phase, err = trial.ParsePhase(o.when); err != nil {
		return nil, err
	}
	if o.app != "" {
		if o.app, err = filepath.Abs(o.app); err != nil {
			return nil, fmt.Errorf("--app: %w", err)
		}
	}
	if o.out != "" {
		if o.out, err = filepath.Abs(o.out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
	}
	return o, nil
}

// chaosTopology builds the plan the front-end will build (test node i is
// plan node i+1) and the block placement of the ranks.
func chaosTopology(o *chaosOptions) (trial.Topology, error) {
	kind, err := plan.ParseKind(o.tree)
	if err != nil {
		return trial.Topology{}, fmt.Errorf("--tree: %w", err)
	}
	if kind.Shape == plan.Auto {
		// The front-end shapes auto with its own calibration of local
		// starts, which chaos cannot see: the plan must be known up front.
		return trial.Topology{}, errors.New("--tree auto: chaos plans its faults over the launch tree up front; give a kind (kary:2, binomial, greedy, 2level, flat)")
	}
	pl, err := plan.Build(kind, o.nodes+1, plan.Params{Replicas: o.replicas})
	if err != nil {
		return trial.Topology{}, err
	}
	t := trial.Topology{Parent: make([]int, o.nodes)}
	for v := 1; v <= o.nodes; v++ {
		t.Parent[v-1] = int(pl.Parent[v]) - 1
	}
	for _, v := range pl.ReplicaNodes[1:] {
		t.Replicas = append(t.Replicas, int(v)-1)
	}
	for r := range o.nodes * o.ppn {
		t.RankNode = append(t.RankNode, r/o.ppn)
	}
	// Test nodes: the spares are the last --spare-nodes of --test-nodes
	// N+K (ftlaunch run's own rule); emulated hosts are named once up.
	for i := o.nodes; i < o.nodes+o.spareNodes; i++ {
		t.Spares = append(t.Spares, trial.NodeName(i))
	}
	return t, nil
}

func chaosCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "app" {
		return chaosAppCommand(args[1:], stdout, stderr)
	}
	o, err := parseChaosFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, chaosUsage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v (see ftlaunch chaos --help)\n", err)
		return 2
	}
	topo, err := chaosTopology(o)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 2
	}
	cfg := trial.Config{
		Cluster: trial.Cluster(o.cluster), Faults: o.parsedFault, When: o.phase, Concurrent: o.concurrent,
		Replicas: o.replicas, Policy: o.policy, RunLength: time.Duration(o.steps) * o.interval,
	}
	if err := trial.Validate(cfg, topo); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 2
	}
	if !o.seedSet {
		o.seed = uint64(time.Now().UnixNano())
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: cannot find my own executable: %v\n", err)
		return 1
	}
	// Each run has a directory of its own (under --out when given), so
	// that runs sharing --out never mix their trials.
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: --out: %v\n", err)
			return 1
		}
	}
	if o.out, err = os.MkdirTemp(o.out, "ftlaunch-chaos-"); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var hosts *chaosHosts
	where := fmt.Sprintf("%d test nodes", o.nodes)
	if cfg.Cluster == trial.Emulated {
		start := time.Now()
		hosts, err = upChaosHosts(ctx, o)
		if hosts != nil {
			// Down also on an error or an interrupt: nothing of the
			// cluster outlives the run.
			defer func() {
				if err := hosts.down(); err != nil {
					fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
				}
			}()
		}
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
			return 1
		}
		topo.Names, topo.Spares = hosts.names[:o.nodes], hosts.names[o.nodes:]
		where = fmt.Sprintf("%d emulated hosts (cluster %s, %s, up in %.2fs)", o.nodes, o.clusterName, o.clusterPrefix, time.Since(start).Seconds())
	}
	if len(topo.Spares) > 0 {
		where += fmt.Sprintf(" + spare(s) %s", strings.Join(topo.Spares, ","))
	}

	faults := cfg.Faults
	if faults == nil {
		faults = trial.Available(cfg.Cluster, topo, cfg.Replicas)
	}
	fmt.Fprintf(stdout, "chaos: %d trial(s) on %s x %d ranks, %s tree, %d replica(s), --restart %s; faults %s, when %s, %d per trial; seed %d; trials in %s\n",
		o.trials, where, o.ppn, o.tree, o.replicas, o.restart, faultList(faults), o.when, o.concurrent, o.seed, o.out)
	var results []*trialResult
	for i := range o.trials {
		tr, err := trial.Schedule(i, trial.TrialSeed(o.seed, i), cfg, topo)
		if err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
			return 2
		}
		r := runTrial(ctx, o, self, topo, hosts, tr, stderr)
		results = append(results, r)
		writeTrialReport(stdout, o, r)
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: interrupted after %d trial(s)\n", len(results))
			break
		}
	}
	writeChaosSummary(stdout, results)
	failed := 0
	for _, r := range results {
		if !r.pass() {
			failed++
		}
	}
	if !o.keep && failed == 0 {
		os.Remove(o.out) // empty unless a trial kept its directory
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(results)-failed, failed)
	if failed > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}

func faultList(fs []trial.Fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ",")
}

// replayCommand is the command line that runs trial r again.
func replayCommand(o *chaosOptions, seed uint64) string {
	self, err := os.Executable()
	if err != nil {
		self = "ftlaunch"
	}
	args := []string{self, "chaos", "--cluster", o.cluster, "--nodes", strconv.Itoa(o.nodes), "--ppn", strconv.Itoa(o.ppn),
		"--trials", "1", "--seed", strconv.FormatUint(seed, 10), "--when", o.when, "--concurrent", strconv.Itoa(o.concurrent),
		"--restart", o.restart, "--replicas", strconv.Itoa(o.replicas), "--spare-nodes", strconv.Itoa(o.spareNodes), "--tree", o.tree,
		"--steps", strconv.Itoa(o.steps), "--interval", o.interval.String()}
	if o.faults != "" {
		args = append(args, "--faults", o.faults)
	}
	if o.cluster == string(trial.Emulated) && (o.clusterName != chaosClusterName || o.clusterPrefix != chaosClusterPrefix) {
		args = append(args, "--cluster-name", o.clusterName, "--cluster-prefix", o.clusterPrefix)
	}
	if o.app != "" {
		args = append(args, "--app", o.app)
		if len(o.appArgs) > 0 {
			args = append(append(args, "--"), o.appArgs...)
		}
	}
	return strings.Join(args, " ")
}

// at is ds[k], or -1 beyond its end.
func at(ds []time.Duration, k int) time.Duration {
	if k < len(ds) {
		return ds[k]
	}
	return -1
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// writeTrialReport prints one trial: its faults with their times, the
// ending, the durations measured, and pass or the first violation.
func writeTrialReport(w io.Writer, o *chaosOptions, r *trialResult) {
	tr := r.trial
	fmt.Fprintf(w, "trial %d seed %d, %s phase", tr.Index+1, tr.Seed, tr.Phase)
	if tr.Hold >= 0 {
		fmt.Fprintf(w, " (%s held back)", r.hold)
	}
	fmt.Fprintln(w, ":")
	for k, a := range r.applied {
		if a.Skipped != "" {
			fmt.Fprintf(w, "  fault %-16s not applied: %s\n", a.Action.String(), a.Skipped)
			continue
		}
		fmt.Fprintf(w, "  fault %-16s", a.Action.String())
		if a.PID > 0 {
			fmt.Fprintf(w, " pid %d", a.PID)
		}
		fmt.Fprintf(w, " at +%.3fs", a.Time.Sub(r.start).Seconds())
		if a.Trigger {
			fmt.Fprint(w, " (the trigger)")
		}
		if a.During != "" {
			fmt.Fprintf(w, " in the recovery's %s stage", a.During)
		}
		if d := at(r.detect, k); d >= 0 {
			fmt.Fprintf(w, ", detected after %s", secs(d))
			if tr.Phase == trial.Launch && a.Tabled && o.policy != trial.NoRestart {
				fmt.Fprint(w, " (after the first node table)")
			}
		}
		if d := at(r.resumed, k); d >= 0 {
			again := "SIGCONT"
			if a.Fault == trial.Partition {
				again = "healed"
			}
			fmt.Fprintf(w, ", %s after %s", again, secs(d))
		}
		if k < len(r.stale) && r.stale[k] != nil {
			st := r.stale[k]
			fmt.Fprintf(w, "; its incarnation: %d process(es) up at the job's end", st.atEnd)
			if st.back {
				fmt.Fprintf(w, ", %d when it ran again", st.atBack)
			}
			if st.back && st.atBack > 0 && st.gone >= 0 {
				fmt.Fprintf(w, ", the last gone %s after", secs(st.gone))
			}
		}
		fmt.Fprintln(w)
	}
	for _, rc := range r.outcome.Recoveries {
		fmt.Fprintf(w, "  recovery of %s: %s", rc.Subject, rc.Outcome)
		if rc.Done {
			fmt.Fprintf(w, ", %.3fs after the failure", rc.TotalMS/1000)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  ended %s", r.ending())
	if r.takeover >= 0 {
		fmt.Fprintf(w, "; successor root took over after %s", secs(r.takeover))
	}
	fmt.Fprintf(w, "; job over after %s with %d of its processes up; the last gone %s after that (or after the last SIGCONT)\n",
		secs(r.jobTime), r.atEnd, secs(r.cleanup))
	for _, n := range r.notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if r.pass() {
		fmt.Fprintln(w, "  PASS")
		return
	}
	fmt.Fprintf(w, "  FAIL %s\n", r.violations[0])
	for _, v := range r.violations[1:] {
		fmt.Fprintf(w, "       also %s\n", v)
	}
	fmt.Fprintf(w, "  kept: %s\n", r.dir)
	fmt.Fprintf(w, "  replay: %s\n", replayCommand(o, tr.Seed))
}

// writeChaosSummary prints one row per trial.
func writeChaosSummary(w io.Writer, rs []*trialResult) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tSEED\tPHASE\tFAULTS\tDETECTED\tRECOVERED\tENDED\tCLEANUP\tRESULT")
	for _, r := range rs {
		var fs, det []string
		for k, a := range r.applied {
			s := a.Action.String()
			if a.Skipped != "" {
				s += " (not applied)"
			}
			fs = append(fs, s)
			if d := at(r.detect, k); d >= 0 {
				det = append(det, secs(d))
			}
		}
		if r.takeover >= 0 {
			det = append(det, "takeover "+secs(r.takeover))
		}
		if len(det) == 0 {
			det = []string{"-"}
		}
		var rec []string
		for _, rc := range r.outcome.Recoveries {
			if rc.Done {
				rec = append(rec, fmt.Sprintf("%.3fs", rc.TotalMS/1000))
			} else {
				rec = append(rec, rc.Outcome)
			}
		}
		if len(rec) == 0 {
			rec = []string{"-"}
		}
		res := "pass"
		if !r.pass() {
			res = "FAIL " + r.violations[0].Invariant
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.trial.Index+1, r.trial.Seed, r.trial.Phase,
			strings.Join(fs, " + "), strings.Join(det, ","), strings.Join(rec, ","), r.ending(), secs(r.cleanup), res)
	}
	tw.Flush()
}
