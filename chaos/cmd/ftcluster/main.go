// Command ftcluster brings an emulated cluster (package chaos/cluster) up and
// down on this machine, shows its state and injects faults into its nodes.
//
// Usage:
//
//	ftcluster [global flags] up [-n N] [-max-startups S]
//	ftcluster [global flags] down | status | env
//	ftcluster [global flags] kill | partition | heal | revive NODE
//	ftcluster [global flags] exec NODE COMMAND [ARG...]
//	ftcluster [global flags] slow NODE DELAY [LOSS]
//
// Global flags name the cluster (-name, -state, -prefix, ...); run
// `ftcluster -h` for the list. It must run as root.
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
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: ftcluster [global flags] COMMAND [ARGS]

commands:
  up [-n N] [-max-startups S]  bring up N nodes (a cluster of the same name is removed first)
  down                         remove the cluster (also what a crashed run left)
  status                       show the nodes and what runs in them
  env                          print shell assignments: FTCLUSTER_SSH_CONFIG and others
  kill NODE                    crash a node (link down, then SIGKILL all its processes)
  partition NODE               take a node's link down, killing nothing
  heal NODE                    bring a partitioned node's link back up
  revive NODE                  reboot a node: fresh namespace, same address and MAC, new sshd
  exec NODE COMMAND [ARG...]   run a command inside a node
  slow NODE DELAY [LOSS]       delay (e.g. 20ms) and drop a fraction (0-1) of the packets
                               entering NODE, until interrupted

global flags:
`

// run is the whole command; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ftcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cluster.Config
	var prefix string
	fs.StringVar(&cfg.Name, "name", cluster.DefaultName, "cluster name (at most 8 of [a-z0-9-])")
	fs.StringVar(&cfg.StateRoot, "state", cluster.DefaultStateRoot, "directory of the clusters' state directories")
	fs.StringVar(&prefix, "prefix", cluster.DefaultPrefix().String(), "IPv4 network of the cluster (bridge at .1, nodes from .2)")
	fs.StringVar(&cfg.Bridge, "bridge", "", "bridge name (default NAME+\"br\")")
	fs.StringVar(&cfg.NetnsPrefix, "netns-prefix", "", "network namespace name prefix (default NAME+\"-\")")
	fs.StringVar(&cfg.VethPrefix, "veth-prefix", "", "host-side veth name prefix (default NAME+\"v\")")
	fs.StringVar(&cfg.SSHD, "sshd", cluster.DefaultSSHD, "sshd binary, by absolute path")
	fs.DurationVar(&cfg.ConnectTimeout, "connect-timeout", cluster.DefaultConnectTimeout, "ConnectTimeout in the generated ssh config")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		fmt.Fprintf(stderr, "ftcluster: -prefix: %v\n", err)
		return 2
	}
	cfg.Prefix = p
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if err := dispatch(ctx, cfg, cmd, rest, stdout, stderr); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ftcluster: %v\n", err)
			return 2
		}
		fmt.Fprintf(stderr, "ftcluster %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// usageError marks errors in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func dispatch(ctx context.Context, cfg cluster.Config, cmd string, args []string, stdout, stderr io.Writer) error {
	node := func() (string, error) {
		if len(args) != 1 {
			return "", usageError{cmd + ": want exactly one NODE"}
		}
		return args[0], nil
	}
	switch cmd {
	case "up":
		fs := flag.NewFlagSet("up", flag.ContinueOnError)
		fs.SetOutput(stderr)
		n := fs.Int("n", 4, "number of nodes")
		fs.StringVar(&cfg.MaxStartups, "max-startups", "", "sshd MaxStartups (default: OpenSSH's)")
		if err := fs.Parse(args); err != nil {
			return usageError{"up: " + err.Error()}
		}
		if fs.NArg() != 0 {
			return usageError{"up: unexpected arguments"}
		}
		start := time.Now()
		c, err := cluster.Up(ctx, cfg, *n)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster %s: %d nodes up in %.2fs\n", c.Config().Name, *n, time.Since(start).Seconds())
		fmt.Fprintf(stdout, "ssh -F %s node001 hostname\n", c.SSHConfig())
		return nil
	case "down":
		if len(args) != 0 {
			return usageError{"down: unexpected arguments"}
		}
		start := time.Now()
		if err := cluster.Clean(ctx, cfg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "cluster %s: down in %.2fs\n", cfg.Name, time.Since(start).Seconds())
		return nil
	case "status":
		c, err := cluster.Open(cfg)
		if err != nil {
			return err
		}
		return printStatus(c, stdout)
	case "env":
		c, err := cluster.Open(cfg)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "FTCLUSTER_NAME=%s\nFTCLUSTER_DIR=%s\nFTCLUSTER_SSH_CONFIG=%s\nFTCLUSTER_BRIDGE=%s\nFTCLUSTER_BRIDGE_ADDR=%s\n",
			c.Config().Name, c.Dir(), c.SSHConfig(), c.Config().Bridge, c.BridgeAddr())
		return nil
	case "kill", "partition", "heal", "revive":
		name, err := node()
		if err != nil {
			return err
		}
		c, err := cluster.Open(cfg)
		if err != nil {
			return err
		}
		op := map[string]func(context.Context, string) error{
			"kill": c.Kill, "partition": c.Partition, "heal": c.Heal, "revive": c.Revive,
		}[cmd]
		return op(ctx, name)
	case "exec":
		if len(args) < 2 {
			return usageError{"exec: want NODE COMMAND [ARG...]"}
		}
		c, err := cluster.Open(cfg)
		if err != nil {
			return err
		}
		x, err := c.Command(ctx, args[0], args[1:]...)
		if err != nil {
			return err
		}
		x.Stdin, x.Stdout, x.Stderr = os.Stdin, stdout, stderr
		return x.Run()
	case "slow":
		if len(args) < 2 || len(args) > 3 {
			return usageError{"slow: want NODE DELAY [LOSS]"}
		}
		delay, err := time.ParseDuration(args[1])
		if err != nil {
			return usageError{"slow: " + err.Error()}
		}
		loss := 0.0
		if len(args) == 3 {
			if loss, err = strconv.ParseFloat(args[2], 64); err != nil {
				return usageError{"slow: " + err.Error()}
			}
		}
		c, err := cluster.Open(cfg)
		if err != nil {
			return err
		}
		sl, err := c.SlowLink(ctx, args[0], delay, loss)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: packets entering it wait %v, %.1f%% dropped; interrupt to stop\n", args[0], delay, 100*loss)
		<-ctx.Done()
		err = sl.Stop()
		passed, dropped := sl.Counts()
		fmt.Fprintf(stdout, "%s: slow link stopped: %d packets passed, %d dropped\n", args[0], passed, dropped)
		return err
	default:
		return usageError{fmt.Sprintf("unknown command %q (see ftcluster -h)", cmd)}
	}
}

func printStatus(c *cluster.Cluster, w io.Writer) error {
	st, err := c.Status()
	if err != nil {
		return err
	}
	cfg := c.Config()
	fmt.Fprintf(w, "cluster %s: %d nodes, bridge %s %s/%d, state %s\n",
		cfg.Name, len(st), cfg.Bridge, c.BridgeAddr(), cfg.Prefix.Bits(), c.Dir())
	fmt.Fprintf(w, "ssh config: %s\n", c.SSHConfig())
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDR\tSTATE\tLINK\tSSHD\tPROCS\tBOOTS")
	for _, s := range st {
		link, sshd := "down", "-"
		if s.LinkUp {
			link = "up"
		}
		if s.SSHDAlive {
			sshd = fmt.Sprint(s.SSHDPID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", s.Name, s.Addr, s.State, link, sshd, s.Procs, s.Boots)
	}
	return tw.Flush()
}
