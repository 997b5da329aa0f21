package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// Package harness runs ftlaunch jobs under seeded faults and judges each
// against the promises of its restart policy: `ftlaunch chaos`. The
// command parses the flags into Options; Run does the rest.

// Options are one chaos run's settings: ftlaunch chaos's flags, parsed
// and checked by the command.
type Options struct {
	Cluster       string
	ClusterName   string
	ClusterPrefix string
	Nodes, PPN    int
	Trials        int
	Seed          uint64
	SeedSet       bool
	Faults        string
	When          string
	Concurrent    int
	Restart       string
	Replicas      int
	SpareNodes    int
	Tree          string
	App           string
	AppArgs       []string
	// AppKind is --app-kind (KindDefault: none given); MPISource is the
	// MPI kind's program source (mpi_ckpt.c), built into the run's
	// directory as MPIBin.
	AppKind      AppKind
	MPISource    []byte
	MPIBin       string
	Steps        int
	Interval     time.Duration
	Out          string
	Keep         bool
	Strict       bool
	TrialLimit   time.Duration
	ParsedFaults []trial.Fault
	Phase        trial.Phase
	Policy       trial.Policy
}

// Topology builds the plan the front-end will build (test node i is
// plan node i+1) and the block placement of the ranks.
func Topology(o *Options) (trial.Topology, error) {
	kind, err := plan.ParseKind(o.Tree)
	if err != nil {
		return trial.Topology{}, fmt.Errorf("--tree: %w", err)
	}
	if kind.Shape == plan.Auto {
		// The front-end shapes auto with its own calibration of local
		// starts, which chaos cannot see: the plan must be known up front.
		return trial.Topology{}, errors.New("--tree auto: chaos plans its faults over the launch tree up front; give a kind (kary:2, binomial, greedy, 2level, flat)")
	}
	pl, err := plan.Build(kind, o.Nodes+1, plan.Params{Replicas: o.Replicas})
	if err != nil {
		return trial.Topology{}, err
	}
	t := trial.Topology{Parent: make([]int, o.Nodes)}
	for v := 1; v <= o.Nodes; v++ {
		t.Parent[v-1] = int(pl.Parent[v]) - 1
	}
	for _, v := range pl.ReplicaNodes[1:] {
		t.Replicas = append(t.Replicas, int(v)-1)
	}
	for r := range o.Nodes * o.PPN {
		t.RankNode = append(t.RankNode, r/o.PPN)
	}
	// Test nodes: the spares are the last --spare-nodes of --test-nodes
	// N+K (ftlaunch run's own rule); emulated hosts are named once up.
	for i := o.Nodes; i < o.Nodes+o.SpareNodes; i++ {
		t.Spares = append(t.Spares, trial.NodeName(i))
	}
	return t, nil
}

// Run runs o.Trials trials of topology topo, one after another, printing
// each trial's report to stdout as it ends, then a row per trial and the
// line "N passed, M failed". It returns the command's exit status: 0 when
// every trial passed, 1 when one failed or the run could not go on (ctx
// ended: the trials so far are reported), 2 for a schedule it cannot make.
func Run(ctx context.Context, o *Options, cfg trial.Config, topo trial.Topology, stdout, stderr io.Writer) int {
	if !o.SeedSet {
		o.Seed = uint64(time.Now().UnixNano())
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: cannot find my own executable: %v\n", err)
		return 1
	}
	// Each run has a directory of its own (under --out when given), so
	// that runs sharing --out never mix their trials.
	if o.Out != "" {
		if err := os.MkdirAll(o.Out, 0o755); err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: --out: %v\n", err)
			return 1
		}
	}
	if o.Out, err = os.MkdirTemp(o.Out, "ftlaunch-chaos-"); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 1
	}
	if o.AppKind == KindMPI {
		// Built for this run, removed at its end (a replay builds it again).
		app := filepath.Join(o.Out, "app")
		defer os.RemoveAll(app)
		if o.MPIBin, err = buildMPI(app, o.MPISource); err != nil {
			fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
			return 1
		}
	}
	var hosts *chaosHosts
	where := fmt.Sprintf("%d test nodes", o.Nodes)
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
		topo.Names, topo.Spares = hosts.names[:o.Nodes], hosts.names[o.Nodes:]
		where = fmt.Sprintf("%d emulated hosts (cluster %s, %s, up in %.2fs)", o.Nodes, o.ClusterName, o.ClusterPrefix, time.Since(start).Seconds())
	}
	if len(topo.Spares) > 0 {
		where += fmt.Sprintf(" + spare(s) %s", strings.Join(topo.Spares, ","))
	}

	faults := cfg.Faults
	if faults == nil {
		faults = trial.Available(cfg.Cluster, topo, cfg.Replicas)
	}
	app := "the default application"
	if o.AppKind != KindDefault {
		app = "application kind " + string(o.AppKind)
	}
	if o.App != "" {
		app = o.App
	}
	fmt.Fprintf(stdout, "chaos: %d trial(s) on %s x %d ranks, %s tree, %d replica(s), --restart %s, %s; faults %s, when %s, %d per trial; seed %d; trials in %s\n",
		o.Trials, where, o.PPN, o.Tree, o.Replicas, o.Restart, app, faultList(faults), o.When, o.Concurrent, o.Seed, o.Out)
	var results []*trialResult
	for i := range o.Trials {
		tr, err := trial.Schedule(i, trial.TrialSeed(o.Seed, i), cfg, topo)
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
	if !o.Keep && failed == 0 {
		os.RemoveAll(filepath.Join(o.Out, "app"))
		os.Remove(o.Out) // empty unless a trial kept its directory
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", len(results)-failed, failed)
	if failed > 0 || ctx.Err() != nil {
		return 1
	}
	return 0
}
