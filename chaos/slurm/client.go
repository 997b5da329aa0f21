package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// Command returns a command that runs argv (a Slurm client such as srun,
// salloc, sbatch, sinfo, scontrol, or a program that calls them) inside the
// controller node, the cluster's login node, in the caller's working
// directory (nodes share the file system), with SLURM_CONF set. The
// caller's own SLURM_* variables are dropped, so a test that itself runs
// under Slurm does not leak its job into this cluster; so are the
// emulated cluster's per-node variables of the login node (FTCLUSTER_NODE,
// FTCLUSTER_ADDR, FTCLUSTER_SCRATCH, its TMPDIR), which srun would
// otherwise export to every task. ctx kills the command as in
// exec.CommandContext.
func (c *Cluster) Command(ctx context.Context, argv ...string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("slurm command: empty argv")
	}
	wd, err := os.Getwd()
	if err != nil {
		wd = "/"
	}
	// The login node's mount namespace starts commands in "/"; env -C
	// restores the working directory.
	cmd, err := c.emu.Command(ctx, c.ctl, append([]string{"env", "-C", wd}, argv...)...)
	if err != nil {
		return nil, fmt.Errorf("slurm command %q: %w", argv[0], err)
	}
	cmd.Env = c.clientEnv(cmd.Env)
	return cmd, nil
}

// clientEnv filters env (the caller's environment followed by the login
// node's variables) for a Slurm client; see Command.
func (c *Cluster) clientEnv(env []string) []string {
	callerTMP, hasTMP := os.LookupEnv("TMPDIR")
	drop := map[string]bool{"FTCLUSTER_NODE": true, "FTCLUSTER_ADDR": true, "FTCLUSTER_SCRATCH": true, "TMPDIR": true}
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "SLURM_") {
			continue
		}
		out = append(out, kv)
	}
	if hasTMP {
		out = append(out, "TMPDIR="+callerTMP)
	}
	return append(out, "SLURM_CONF="+c.files.conf())
}

// Env returns the variables a Slurm client needs for this cluster
// (SLURM_CONF=...), for shells and for programs run inside the login node.
func (c *Cluster) Env() []string { return []string{"SLURM_CONF=" + c.files.conf()} }

// Run runs a Slurm client (see Command) and returns its standard output. A
// failure's error includes its standard error.
func (c *Cluster) Run(ctx context.Context, argv ...string) ([]byte, error) {
	cmd, err := c.Command(ctx, argv...)
	if err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%q: %w: %s", argv, err, bytes.TrimSpace(errb.Bytes()))
	}
	return out.Bytes(), nil
}

// Result is what a command run in an allocation left.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is salloc's exit code: the command's, or non-zero when
	// salloc itself failed (then Stderr says why).
	ExitCode int
	// Elapsed is the wall time of the whole salloc.
	Elapsed time.Duration
}

// AllocArgs is the salloc command line for Alloc: -N nodes, -n tasks when
// tasks > 0, --no-kill when noKill, then the command.
func AllocArgs(nodes, tasks int, noKill bool, cmd ...string) []string {
	argv := []string{"salloc", "-N", strconv.Itoa(nodes)}
	if tasks > 0 {
		argv = append(argv, "-n", strconv.Itoa(tasks))
	}
	if noKill {
		argv = append(argv, "--no-kill")
	}
	return append(argv, cmd...)
}

// AllocCommand returns the command Alloc runs, for callers that need to
// run it in the background (Start, then Wait) or feed it input.
func (c *Cluster) AllocCommand(ctx context.Context, nodes, tasks int, noKill bool, cmd ...string) (*exec.Cmd, error) {
	if len(cmd) == 0 {
		return nil, errors.New("alloc: empty command")
	}
	return c.Command(ctx, AllocArgs(nodes, tasks, noKill, cmd...)...)
}

// Alloc runs cmd inside a salloc allocation of nodes nodes and tasks tasks
// (no -n when tasks is 0: one task per node), made with --no-kill when
// noKill, so that the allocation survives the loss of a node. The command
// runs in the login node with the allocation's SLURM_* variables; its
// srun steps run on the compute nodes. A non-zero exit code is reported in
// the Result, not as an error; the error is for a command that could not
// run or was ended by ctx.
func (c *Cluster) Alloc(ctx context.Context, nodes, tasks int, noKill bool, cmd ...string) (Result, error) {
	ec, err := c.AllocCommand(ctx, nodes, tasks, noKill, cmd...)
	if err != nil {
		return Result{}, err
	}
	var out, errb bytes.Buffer
	ec.Stdout = &out
	ec.Stderr = &errb
	start := time.Now()
	err = ec.Run()
	res := Result{Stdout: out.Bytes(), Stderr: errb.Bytes(), Elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, fmt.Errorf("salloc %q: %w", cmd, ctx.Err())
	case errors.As(err, &ee) && ee.Exited():
		res.ExitCode = ee.ExitCode()
	default:
		return res, fmt.Errorf("salloc %q: %w: %s", cmd, err, bytes.TrimSpace(errb.Bytes()))
	}
	return res, nil
}

// NodeStates asks sinfo for the state of every compute node: node name →
// state as sinfo's %T prints it ("idle", "allocated", "mixed", "down*",
// ...; a trailing "*" means slurmctld gets no answer from the node).
func (c *Cluster) NodeStates(ctx context.Context) (map[string]string, error) {
	out, err := c.Run(ctx, "sinfo", "--noheader", "--Node", "--format=%N %T")
	if err != nil {
		return nil, fmt.Errorf("node states: %w", err)
	}
	states := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		states[f[0]] = f[1]
	}
	return states, nil
}

// WaitNodeStates polls sinfo until cond holds for the node states (see
// NodeStates) and returns them, or fails after timeout with the last states
// seen.
func (c *Cluster) WaitNodeStates(ctx context.Context, timeout time.Duration, cond func(map[string]string) bool) (map[string]string, error) {
	var last map[string]string
	var lastErr error
	err := cluster.Poll(ctx, timeout, "wait for node states", func() (bool, error) {
		s, err := c.NodeStates(ctx)
		if err != nil {
			lastErr = err // slurmctld may not answer yet
			return false, nil
		}
		last = s
		return cond(s), nil
	})
	if err != nil {
		return last, fmt.Errorf("%w: last states %s (last error: %v)", err, formatStates(last), lastErr)
	}
	return last, nil
}

// formatStates prints node states sorted by node.
func formatStates(s map[string]string) string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + s[n]
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// Daemon is one running Slurm or munge daemon of the cluster.
type Daemon struct {
	Node string // node it runs in
	Name string // "munged", "slurmctld" or "slurmd"
	PID  int
}

// Daemons lists the daemons that run, from their pid files, keeping only
// those whose process is in the right node's network namespace.
func (c *Cluster) Daemons() ([]Daemon, error) {
	nodes, err := c.emu.Nodes()
	if err != nil {
		return nil, err
	}
	netns := make(map[string]string, len(nodes))
	names := make([]string, 0, len(nodes))
	for _, nd := range nodes {
		netns[nd.Name] = nd.Netns
		names = append(names, nd.Netns)
	}
	byNS, err := procsInNetns(names)
	if err != nil {
		return nil, err
	}
	in := func(node string, pid int) bool {
		for _, p := range byNS[netns[node]] {
			if p.PID == pid {
				return true
			}
		}
		return false
	}
	type pf struct{ node, name, path string }
	files := []pf{{c.ctl, "munged", c.files.mungePid()}, {c.ctl, "slurmctld", c.files.ctlPid()}}
	for _, n := range c.nodes {
		files = append(files, pf{n, "slurmd", c.files.slurmdPid(n)})
	}
	var out []Daemon
	for _, f := range files {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !in(f.node, pid) {
			continue
		}
		out = append(out, Daemon{Node: f.node, Name: f.name, PID: pid})
	}
	return out, nil
}
