package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/harness"
	"github.com/ftlaunch/ftlaunch/chaos/trial"
)

// mpiCkptSource is the MPI kind's program (--app-kind mpi): the tests'
// checkpoint program, built by the chaos run with mpicc.mpich.
//
//go:embed testdata/mpi_ckpt.c
var mpiCkptSource []byte

func parseChaosFlags(args []string) (*harness.Options, error) {
	o := &harness.Options{}
	fs := flag.NewFlagSet("ftlaunch chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Cluster, "cluster", "", "")
	fs.StringVar(&o.ClusterName, "cluster-name", harness.DefaultClusterName, "")
	fs.StringVar(&o.ClusterPrefix, "cluster-prefix", harness.DefaultClusterPrefix, "")
	fs.IntVar(&o.Nodes, "nodes", 6, "")
	fs.IntVar(&o.PPN, "ppn", 2, "")
	fs.IntVar(&o.Trials, "trials", 10, "")
	seed := fs.String("seed", "", "")
	fs.StringVar(&o.Faults, "faults", "", "")
	fs.StringVar(&o.When, "when", "any", "")
	fs.IntVar(&o.Concurrent, "concurrent", 1, "")
	fs.StringVar(&o.Restart, "restart", "none", "")
	fs.IntVar(&o.Replicas, "replicas", 1, "")
	fs.IntVar(&o.SpareNodes, "spare-nodes", 0, "")
	fs.StringVar(&o.Tree, "tree", "kary:2", "")
	fs.StringVar(&o.App, "app", "", "")
	kind := fs.String("app-kind", "", "")
	fs.IntVar(&o.Steps, "steps", 20, "")
	fs.DurationVar(&o.Interval, "interval", 100*time.Millisecond, "")
	fs.StringVar(&o.Out, "out", "", "")
	fs.BoolVar(&o.Keep, "keep", false, "")
	fs.BoolVar(&o.Strict, "strict", false, "")
	fs.DurationVar(&o.TrialLimit, "trial-timeout", 2*time.Minute, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	o.AppArgs = fs.Args()
	if len(o.AppArgs) > 0 && o.App == "" {
		return nil, fmt.Errorf("unexpected argument %q (application arguments need --app)", o.AppArgs[0])
	}
	switch trial.Cluster(o.Cluster) {
	case trial.TestNodes:
	case trial.Emulated:
		if p, err := netip.ParsePrefix(o.ClusterPrefix); err != nil || !p.Addr().Is4() {
			return nil, fmt.Errorf("--cluster-prefix %q: want an IPv4 network, e.g. %s", o.ClusterPrefix, harness.DefaultClusterPrefix)
		}
		if os.Geteuid() != 0 {
			return nil, errors.New("--cluster emulated needs root (network namespaces, links, sshd): run it as root, or use --cluster test-nodes")
		}
	case "":
		return nil, errors.New("--cluster is required: test-nodes or emulated")
	default:
		return nil, fmt.Errorf("--cluster %q: want test-nodes or emulated", o.Cluster)
	}
	policy, err := trial.ParsePolicy(o.Restart)
	if err != nil {
		return nil, err
	}
	o.Policy = policy
	if *kind != "" {
		if o.App != "" {
			return nil, errors.New("--app and --app-kind: give one (--app runs your program, --app-kind one of chaos's)")
		}
		if o.AppKind, err = harness.ParseAppKind(*kind); err != nil {
			return nil, err
		}
		if o.AppKind == harness.KindMPI {
			if policy == trial.RestartRank {
				return nil, errors.New("--app-kind mpi with --restart rank: an MPI job cannot replace one rank (the job ends at its first PMI init); use --restart job")
			}
			o.MPISource = mpiCkptSource
		}
	}
	if o.Nodes < 1 || o.PPN < 1 || o.Trials < 1 || o.Steps < 1 || o.Interval <= 0 {
		return nil, errors.New("--nodes, --ppn, --trials, --steps and --interval must be positive")
	}
	if o.Replicas != 1 && o.Replicas != 3 && o.Replicas != 5 {
		return nil, fmt.Errorf("--replicas must be 1, 3 or 5, got %d", o.Replicas)
	}
	if o.SpareNodes < 0 {
		return nil, fmt.Errorf("--spare-nodes %d: want 0 or more", o.SpareNodes)
	}
	if o.SpareNodes > 0 && policy == trial.NoRestart {
		return nil, errors.New("--spare-nodes needs --restart rank or job: a spare takes the place of a lost node whose ranks start again")
	}
	if o.Replicas > 1 && o.Nodes < o.Replicas-1 {
		return nil, fmt.Errorf("--replicas %d needs at least %d nodes", o.Replicas, o.Replicas-1)
	}
	if *seed != "" {
		s, err := strconv.ParseUint(*seed, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("--seed %q: want an unsigned integer", *seed)
		}
		o.Seed, o.SeedSet = s, true
	}
	if o.ParsedFaults, err = trial.ParseFaults(o.Faults); err != nil {
		return nil, fmt.Errorf("--faults: %w", err)
	}
	if o.Phase, err = trial.ParsePhase(o.When); err != nil {
		return nil, err
	}
	if o.App != "" {
		if o.App, err = filepath.Abs(o.App); err != nil {
			return nil, fmt.Errorf("--app: %w", err)
		}
	}
	if o.Out != "" {
		if o.Out, err = filepath.Abs(o.Out); err != nil {
			return nil, fmt.Errorf("--out: %w", err)
		}
	}
	return o, nil
}

func chaosCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "app" {
		return harness.AppMain(args[1:], stdout, stderr)
	}
	o, err := parseChaosFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, harness.Usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v (see ftlaunch chaos --help)\n", err)
		return 2
	}
	topo, err := harness.Topology(o)
	if err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 2
	}
	cfg := trial.Config{
		Cluster: trial.Cluster(o.Cluster), Faults: o.ParsedFaults, When: o.Phase, Concurrent: o.Concurrent,
		Replicas: o.Replicas, Policy: o.Policy, RunLength: time.Duration(o.Steps) * o.Interval, Program: o.AppKind.Program(),
	}
	if err := trial.Validate(cfg, topo); err != nil {
		fmt.Fprintf(stderr, "ftlaunch chaos: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return harness.Run(ctx, o, cfg, topo, stdout, stderr)
}
