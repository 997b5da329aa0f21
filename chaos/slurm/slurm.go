package slurm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// Cluster is a handle on a running Slurm cluster: one that Up started or
// that Open found. It is safe for concurrent use.
type Cluster struct {
	cfg   Config
	emu   *cluster.Cluster
	files layout
	// nodes are the compute nodes, in index order; ctl is the controller
	// and login node.
	nodes []string
	ctl   string
}

// stateVersion is bumped when the meaning of state.json changes.
const stateVersion = 1

// state is what Open needs to know of a Slurm cluster, kept in
// StateRoot/Name/slurm/state.json.
type state struct {
	Version    int      `json:"version"`
	Config     Config   `json:"config"`
	Nodes      []string `json:"nodes"`
	Controller string   `json:"controller"`
}

// Up brings up an emulated cluster of n compute nodes plus a controller
// node, and a Slurm cluster on it: munge, slurmctld and one slurmd per
// compute node. It returns once sinfo shows every compute node idle. A
// cluster of the same name left by an earlier run is removed first (with
// every process in its nodes); on error, what was created is removed.
func Up(ctx context.Context, cfg Config, n int) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("slurm cluster %q: %d compute nodes: want at least 1", cfg.Cluster.Name, n)
	}
	if err := checkTools(cfg); err != nil {
		return nil, err
	}
	emu, err := cluster.Up(ctx, cfg.Cluster, n+1)
	if err != nil {
		return nil, fmt.Errorf("slurm cluster %q: %w", cfg.Cluster.Name, err)
	}
	cfg.Cluster = emu.Config()
	c := &Cluster{cfg: cfg, emu: emu, files: layout{dir: filepath.Join(emu.Dir(), "slurm")}}
	if err := c.start(ctx, n); err != nil {
		// Remove with a fresh context: ctx may be why the start failed.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := c.Down(dctx); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove after failed start: %w", derr))
		}
		return nil, fmt.Errorf("slurm cluster %q: %w", cfg.Cluster.Name, err)
	}
	return c, nil
}

// Open returns a handle on the running Slurm cluster named by cfg (only
// Cluster.Name and Cluster.StateRoot matter; the rest is read from its
// state directory).
func Open(cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	emu, err := cluster.Open(cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("open slurm cluster: %w", err)
	}
	files := layout{dir: filepath.Join(emu.Dir(), "slurm")}
	b, err := os.ReadFile(files.state())
	if err != nil {
		return nil, fmt.Errorf("open slurm cluster %q (is it a Slurm cluster?): %w", cfg.Cluster.Name, err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("parse %s: %w", files.state(), err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("parse %s: state version %d, want %d", files.state(), st.Version, stateVersion)
	}
	st.Config.Cluster = emu.Config()
	return &Cluster{cfg: st.Config, emu: emu, files: files, nodes: st.Nodes, ctl: st.Controller}, nil
}

// Clean removes whatever exists of the cluster named by cfg, as
// cluster.Clean does, and waits until every process that was in its nodes
// has exited. Removing nothing is not an error.
func Clean(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	procs, err := procsOfCluster(cfg.Cluster)
	if err != nil {
		return err
	}
	if err := cluster.Clean(ctx, cfg.Cluster); err != nil {
		return fmt.Errorf("clean slurm cluster %q: %w", cfg.Cluster.Name, err)
	}
	return waitGone(ctx, procs)
}

// Down stops the Slurm cluster and removes the emulated cluster under it:
// every process in its nodes (slurmctld, slurmd, munged, job steps) is
// killed, found by network namespace; Down then waits until all of them have
// exited, so nothing of the cluster is left. Down of a cluster already down
// is a no-op.
func (c *Cluster) Down(ctx context.Context) error {
	procs, err := procsOfCluster(c.cfg.Cluster)
	if err != nil {
		return err
	}
	if err := c.emu.Down(ctx); err != nil {
		return fmt.Errorf("slurm cluster %q down: %w", c.cfg.Cluster.Name, err)
	}
	if err := waitGone(ctx, procs); err != nil {
		return fmt.Errorf("slurm cluster %q down: %w", c.cfg.Cluster.Name, err)
	}
	return nil
}

// Config returns the configuration with every default filled in.
func (c *Cluster) Config() Config { return c.cfg }

// Emulated is the emulated cluster underneath, for faults (Kill, Partition,
// Heal, SlowLink) and for running programs inside nodes. Revive a compute
// node with the Slurm cluster's Revive, which also restarts its slurmd.
func (c *Cluster) Emulated() *cluster.Cluster { return c.emu }

// Nodes returns the names of the compute nodes, in index order.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.nodes...) }

// Controller is the name of the node that runs slurmctld and munged and in
// which the Slurm clients run.
func (c *Cluster) Controller() string { return c.ctl }

// Dir is the directory of the Slurm cluster's files: slurm.conf, munge
// key and socket, logs, spool directories.
func (c *Cluster) Dir() string { return c.files.dir }

// ConfPath is the path of slurm.conf; clients need SLURM_CONF set to it.
func (c *Cluster) ConfPath() string { return c.files.conf() }

// SlurmctldLog is the path of slurmctld's log.
func (c *Cluster) SlurmctldLog() string { return c.files.ctlLog() }

// SlurmdLog is the path of a compute node's slurmd log.
func (c *Cluster) SlurmdLog(node string) string { return c.files.slurmdLog(node) }

// Kill crashes a compute node (cluster.Kill): link down first, then its
// slurmd and job processes are killed. Slurm learns of it only after
// SlurmdTimeout.
func (c *Cluster) Kill(ctx context.Context, node string) error {
	return c.emu.Kill(ctx, node)
}

// Revive reboots a compute node (cluster.Revive: a fresh namespace with the
// same address) and starts its slurmd again. With ReturnToService=2 a node
// that Slurm had set DOWN for not responding becomes idle once its slurmd
// registers; Revive does not wait for that.
func (c *Cluster) Revive(ctx context.Context, node string) error {
	if !c.isCompute(node) {
		return fmt.Errorf("revive %s: not a compute node of slurm cluster %q", node, c.cfg.Cluster.Name)
	}
	if err := c.emu.Revive(ctx, node); err != nil {
		return err
	}
	if err := c.startSlurmd(ctx, node); err != nil {
		return fmt.Errorf("revive %s: %w", node, err)
	}
	return nil
}

func (c *Cluster) isCompute(node string) bool {
	for _, n := range c.nodes {
		if n == node {
			return true
		}
	}
	return false
}

// checkTools verifies that the daemons and clients are installed.
func checkTools(cfg Config) error {
	for _, p := range []string{cfg.Slurmctld, cfg.Slurmd, cfg.Munged} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("slurm cluster needs %s (run chaos/install-slurm-deps.sh): %w", p, err)
		}
	}
	for _, p := range []string{"sinfo", "srun", "salloc", "sbatch", "scontrol", "env"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("slurm cluster needs %s (run chaos/install-slurm-deps.sh): %w", p, err)
		}
	}
	return nil
}

// start writes the Slurm cluster's files into the emulated cluster's state
// directory, starts munged, slurmctld and the slurmds, and waits until
// every compute node is idle.
func (c *Cluster) start(ctx context.Context, n int) error {
	nodes, err := c.emu.Nodes()
	if err != nil {
		return err
	}
	if len(nodes) != n+1 {
		return fmt.Errorf("emulated cluster has %d nodes, want %d", len(nodes), n+1)
	}
	ctl := nodes[n]
	c.ctl = ctl.Name
	cn := make([]confNode, n)
	for i, nd := range nodes[:n] {
		c.nodes = append(c.nodes, nd.Name)
		cn[i] = confNode{Name: nd.Name, Addr: nd.Addr}
	}
	if err := c.writeFiles(ctl, cn); err != nil {
		return err
	}
	if err := c.startMunge(ctx); err != nil {
		return err
	}
	if err := c.daemon(ctx, c.ctl, filepath.Join(c.files.ctlDir(), "slurmctld.out"), c.cfg.Slurmctld, "-f", c.files.conf()); err != nil {
		return fmt.Errorf("start slurmctld: %w%s", err, logTail(c.files.ctlLog()))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, node := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.startSlurmd(ctx, node); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	_, err = c.WaitNodeStates(ctx, c.cfg.ReadyTimeout, allIdle)
	if err != nil {
		return fmt.Errorf("wait for idle nodes: %w%s", err, logTail(c.files.ctlLog()))
	}
	return nil
}

// allIdle reports whether every node in states is idle.
func allIdle(states map[string]string) bool {
	for _, s := range states {
		if s != "idle" {
			return false
		}
	}
	return len(states) > 0
}

// writeFiles creates the Slurm cluster's directories, munge key, slurm.conf,
// cgroup.conf and state.json.
func (c *Cluster) writeFiles(ctl cluster.Node, nodes []confNode) error {
	l := c.files
	// munged refuses a socket whose directory, or any directory above it,
	// is not executable by all.
	dirs := []string{l.dir, l.mungeDir(), l.mungeRun(), l.ctlDir(), l.ctlState(), l.nodesDir()}
	for _, n := range nodes {
		dirs = append(dirs, l.nodeDir(n.Name), filepath.Join(l.nodeDir(n.Name), "spool"))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create slurm directory: %w", err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("create slurm directory: %w", err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("generate munge key: %w", err)
	}
	if err := os.WriteFile(l.mungeKey(), key, 0o400); err != nil {
		return fmt.Errorf("write munge key: %w", err)
	}
	st, err := json.MarshalIndent(state{Version: stateVersion, Config: c.cfg, Nodes: c.nodes, Controller: c.ctl}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode slurm state: %w", err)
	}
	files := []struct{ path, text string }{
		{l.conf(), slurmConf(c.cfg, l, ctl.Name, ctl.Addr, nodes)},
		{l.cgroupConf(), cgroupConf},
		{l.state(), string(st) + "\n"},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			return fmt.Errorf("write slurm file: %w", err)
		}
	}
	return nil
}

// startMunge starts the cluster's one munged in the controller node and
// waits for its socket, which every node reaches on the shared file system.
func (c *Cluster) startMunge(ctx context.Context) error {
	l := c.files
	err := c.daemon(ctx, c.ctl, filepath.Join(l.mungeDir(), "munged.out"), c.cfg.Munged,
		"--socket="+l.mungeSocket(), "--key-file="+l.mungeKey(), "--pid-file="+l.mungePid(),
		"--log-file="+l.mungeLog(), "--seed-file="+l.mungeSeed())
	if err != nil {
		return fmt.Errorf("start munged: %w%s", err, logTail(l.mungeLog()))
	}
	err = cluster.Poll(ctx, 10*time.Second, "wait for the munge socket", func() (bool, error) {
		_, err := os.Stat(l.mungeSocket())
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("start munged: %w%s", err, logTail(l.mungeLog()))
	}
	return nil
}

// startSlurmd starts a compute node's slurmd.
func (c *Cluster) startSlurmd(ctx context.Context, node string) error {
	if err := os.MkdirAll(filepath.Join(c.files.nodeDir(node), "spool"), 0o755); err != nil {
		return fmt.Errorf("start slurmd on %s: %w", node, err)
	}
	err := c.daemon(ctx, node, c.files.slurmdOut(node), c.cfg.Slurmd, "-f", c.files.conf(), "-N", node)
	if err != nil {
		return fmt.Errorf("start slurmd on %s: %w%s", node, err, logTail(c.files.slurmdLog(node)))
	}
	return nil
}

// daemon runs a daemon's start command inside node; the daemon forks into
// the background, and the command returns. Its output goes to the file out.
func (c *Cluster) daemon(ctx context.Context, node, out string, argv ...string) error {
	cmd, err := c.emu.Command(ctx, node, argv...)
	if err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("daemon output: %w", err)
	}
	defer f.Close()
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s on %s: %w%s", filepath.Base(argv[0]), node, err, logTail(out))
	}
	return nil
}

// logTail formats the end of a log file for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return fmt.Sprintf("\n%s: %s", filepath.Base(path), strings.TrimSpace(string(b)))
}
