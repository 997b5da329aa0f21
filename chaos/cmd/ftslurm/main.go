// Command ftslurm brings a real Slurm test cluster (package chaos/slurm: an
// emulated cluster with munge, slurmctld and one slurmd per node) up and
// down on this machine, shows it, runs Slurm clients against it and crashes
// or revives its nodes.
//
// Usage:
//
//	ftslurm [global flags] up [-n N] [-slurmd-timeout D] [-cpus C]
//	ftslurm [global flags] down | status | env
//	ftslurm [global flags] run COMMAND [ARG...]
//	ftslurm [global flags] kill | revive NODE
//
// `run` runs a command (srun, salloc, sinfo, ...) in the cluster's login
// node with SLURM_CONF set. It must run as root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: ftslurm [global flags] COMMAND [ARGS]

commands:
  up [-n N] [-slurmd-timeout D] [-cpus C]
                          bring up N compute nodes plus a controller/login node, munge,
                          slurmctld and the slurmds; wait until every node is idle
  down                    stop everything and remove the cluster (also what a crashed run left)
  status                  show the nodes, the daemons and sinfo
  env                     print shell assignments: SLURM_CONF and the login node
  run COMMAND [ARG...]    run a command (srun, salloc, sinfo, ...) in the login node
  kill NODE               crash a compute node (link down, then SIGKILL of all in it)
  revive NODE             reboot a compute node and start its slurmd again

global flags:
`

// run is the whole command; it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftslurm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg slurm.Config
	var prefix string
	fs.StringVar(&cfg.Cluster.Name, "name", slurm.DefaultName, "cluster name (at most 8 of [a-z0-9-])")
	fs.StringVar(&cfg.Cluster.StateRoot, "state", cluster.DefaultStateRoot, "directory of the clusters' state directories")
	fs.StringVar(&prefix, "prefix", slurm.DefaultPrefix().String(), "IPv4 network of the cluster (bridge at .1, nodes from .2)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		fmt.Fprintf(stderr, "ftslurm: -prefix: %v\n", err)
		return 2
	}
	cfg.Cluster.Prefix = p
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	switch cmd {
	case "up":
		return up(ctx, cfg, rest, stdout, stderr)
	case "down":
		return down(ctx, cfg, rest, stdout, stderr)
	case "status", "env", "run", "kill", "revive":
	default:
		fmt.Fprintf(stderr, "ftslurm: unknown command %q\n", cmd)
		fs.Usage()
		return 2
	}
	var err2 error
	switch cmd {
	case "status", "env":
		if len(rest) != 0 {
			fmt.Fprintf(stderr, "ftslurm %s: no arguments expected\n", cmd)
			return 2
		}
	case "run":
		if len(rest) == 0 {
			fmt.Fprintln(stderr, "ftslurm run: missing command")
			return 2
		}
	case "kill", "revive":
		if len(rest) != 1 {
			fmt.Fprintf(stderr, "ftslurm %s: want one node name\n", cmd)
			return 2
		}
	}
	c, err := slurm.Open(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ftslurm: %v\n", err)
		return 1
	}
	switch cmd {
	case "status":
		err2 = status(ctx, c, stdout)
	case "env":
		fmt.Fprintf(stdout, "SLURM_CONF=%s; export SLURM_CONF\n", c.ConfPath())
		fmt.Fprintf(stdout, "FTSLURM_LOGIN=%s; export FTSLURM_LOGIN\n", c.Controller())
		fmt.Fprintf(stdout, "FTCLUSTER_SSH_CONFIG=%s; export FTCLUSTER_SSH_CONFIG\n", c.Emulated().SSHConfig())
	case "run":
		return runIn(ctx, c, rest, stdin, stdout, stderr)
	case "kill":
		err2 = c.Kill(ctx, rest[0])
	case "revive":
		err2 = c.Revive(ctx, rest[0])
	}
	if err2 != nil {
		fmt.Fprintf(stderr, "ftslurm %s: %v\n", cmd, err2)
		return 1
	}
	return 0
}

func up(ctx context.Context, cfg slurm.Config, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftslurm up", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 8, "number of compute nodes")
	fs.DurationVar(&cfg.SlurmdTimeout, "slurmd-timeout", slurm.DefaultSlurmdTimeout, "slurm.conf SlurmdTimeout")
	fs.IntVar(&cfg.CPUs, "cpus", slurm.DefaultCPUs, "CPUs per node in slurm.conf")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "ftslurm up: unexpected arguments %q\n", fs.Args())
		return 2
	}
	start := time.Now()
	c, err := slurm.Up(ctx, cfg, *n)
	if err != nil {
		fmt.Fprintf(stderr, "ftslurm up: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "slurm cluster %s: %d compute nodes idle in %.2fs; login node %s\n",
		c.Config().Cluster.Name, len(c.Nodes()), time.Since(start).Seconds(), c.Controller())
	fmt.Fprintf(stdout, "export SLURM_CONF=%s\n", c.ConfPath())
	return 0
}

func down(ctx context.Context, cfg slurm.Config, args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "ftslurm down: no arguments expected")
		return 2
	}
	start := time.Now()
	var err error
	if c, oerr := slurm.Open(cfg); oerr == nil {
		err = c.Down(ctx)
	} else {
		// No (readable) state: remove whatever a crashed run left.
		err = slurm.Clean(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ftslurm down: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "slurm cluster %s: down in %.2fs\n", cfg.Cluster.Name, time.Since(start).Seconds())
	return 0
}

func status(ctx context.Context, c *slurm.Cluster, stdout io.Writer) error {
	st, err := c.Emulated().Status()
	if err != nil {
		return err
	}
	ds, err := c.Daemons()
	if err != nil {
		return err
	}
	daemons := map[string][]string{}
	for _, d := range ds {
		daemons[d.Node] = append(daemons[d.Node], fmt.Sprintf("%s:%d", d.Name, d.PID))
	}
	fmt.Fprintf(stdout, "slurm cluster %s: %d compute nodes, login node %s, SLURM_CONF=%s\n",
		c.Config().Cluster.Name, len(c.Nodes()), c.Controller(), c.ConfPath())
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDR\tSTATE\tLINK\tPROCS\tDAEMONS")
	for _, s := range st {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Addr, s.State, upDown(s.LinkUp), s.Procs, strings.Join(daemons[s.Name], " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	out, err := c.Run(sctx, "sinfo")
	if err != nil {
		return fmt.Errorf("sinfo: %w", err)
	}
	_, err = stdout.Write(out)
	return err
}

func upDown(b bool) string {
	if b {
		return "up"
	}
	return "down"
}

// runIn runs argv in the login node with the caller's standard streams and
// returns its exit code.
func runIn(ctx context.Context, c *slurm.Cluster, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd, err := c.Command(ctx, argv...)
	if err != nil {
		fmt.Fprintf(stderr, "ftslurm run: %v\n", err)
		return 1
	}
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	default:
		fmt.Fprintf(stderr, "ftslurm run: %v\n", err)
		return 1
	}
}
