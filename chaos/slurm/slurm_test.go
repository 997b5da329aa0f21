package slurm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/internal/testbuf"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// requireSlurm skips the test unless this machine can run the Slurm test
// cluster: network namespaces can be created (probed with a throw-away
// namespace), and sshd, the Slurm daemons and clients and munge are
// installed. Tests never install anything.
func requireSlurm(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("slurm cluster: needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("slurm cluster: ip (iproute2) not installed; run chaos/install-deps.sh")
	}
	probe := fmt.Sprintf("ftsprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		tb.Skipf("slurm cluster: cannot create network namespaces here (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		tb.Fatalf("remove probe namespace %s: %v: %s", probe, err, out)
	}
	if _, err := os.Stat(cluster.DefaultSSHD); err != nil {
		tb.Skipf("slurm cluster: %s not installed (openssh-server); run chaos/install-deps.sh", cluster.DefaultSSHD)
	}
	cfg, err := Config{}.withDefaults()
	if err != nil {
		tb.Fatal(err)
	}
	if err := checkTools(cfg); err != nil {
		tb.Skipf("slurm cluster: Slurm not installed: %v", err)
	}
}

// testConfig names a cluster unique to this test run, with its state in a
// fresh directory that munged accepts (executable by all, unlike
// t.TempDir()).
func testConfig(tb testing.TB) Config {
	tb.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	root, err := os.MkdirTemp("", "ftslurm-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	return Config{Cluster: cluster.Config{
		Name:           "s" + hex.EncodeToString(b)[:7],
		StateRoot:      root,
		ConnectTimeout: 2 * time.Second,
	}}
}

// randomPrefix is a random /24 in 10.200.0.0-10.249.255.0 (chaos/cluster's
// tests use 10.100-199).
func randomPrefix() netip.Prefix {
	x, _ := rand.Int(rand.Reader, big.NewInt(50*256))
	v := int(x.Int64())
	return netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 200+v/256, v%256))
}

// upFree brings up a Slurm cluster on a free random prefix.
func upFree(ctx context.Context, cfg Config, n int) (*Cluster, error) {
	var err error
	for try := 0; try < 10; try++ {
		cfg.Cluster.Prefix = randomPrefix()
		var c *Cluster
		c, err = Up(ctx, cfg, n)
		if !errors.Is(err, cluster.ErrPrefixInUse) {
			return c, err
		}
	}
	return nil, err
}

// upTest brings up a Slurm cluster for a test and removes it when the test
// ends.
func upTest(tb testing.TB, cfg Config, n int) *Cluster {
	tb.Helper()
	start := time.Now()
	c, err := upFree(context.Background(), cfg, n)
	if err != nil {
		tb.Fatalf("Up: %v", err)
	}
	tb.Logf("slurm cluster %s: %d nodes up in %v", c.Config().Cluster.Name, n, time.Since(start).Round(time.Millisecond))
	tb.Cleanup(func() {
		if err := c.Down(context.Background()); err != nil {
			tb.Errorf("Down: %v", err)
		}
	})
	return c
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := cluster.Poll(context.Background(), timeout, what, func() (bool, error) { return cond() == nil, nil }); err != nil {
		t.Fatalf("%v: %v", err, cond())
	}
}

// expandHostlist expands Slurm's hostlist syntax as far as this cluster uses
// it: prefix[a-b,c,...] with zero-padded numbers, or comma-separated names.
func expandHostlist(t *testing.T, s string) []string {
	t.Helper()
	m := regexp.MustCompile(`^([a-z]+)\[([0-9,-]+)\]$`).FindStringSubmatch(s)
	if m == nil {
		return strings.Split(s, ",")
	}
	var out []string
	for _, r := range strings.Split(m[2], ",") {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a > b {
			t.Fatalf("bad hostlist range %q in %q", r, s)
		}
		for i := a; i <= b; i++ {
			out = append(out, fmt.Sprintf("%s%0*d", m[1], len(lo), i))
		}
	}
	return out
}

// envOf parses `env` output.
func envOf(out []byte) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestSlurmCluster(t *testing.T) {
	requireSlurm(t)
	t.Parallel()
	cfg := testConfig(t)
	c := upTest(t, cfg, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if got, want := c.Nodes(), []string{"node001", "node002", "node003", "node004"}; !slices.Equal(got, want) {
		t.Fatalf("Nodes() = %v, want %v", got, want)
	}
	ds, err := c.Daemons()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, d := range ds {
		count[d.Name]++
	}
	if count["munged"] != 1 || count["slurmctld"] != 1 || count["slurmd"] != 4 {
		t.Errorf("daemons = %+v, want 1 munged, 1 slurmctld, 4 slurmd", ds)
	}

	t.Run("srun", func(t *testing.T) {
		out, err := c.Run(ctx, "srun", "-N", "4", "-n", "8", "hostname")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, h := range strings.Fields(string(out)) {
			got[h]++
		}
		want := map[string]int{"node001": 2, "node002": 2, "node003": 2, "node004": 2}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("srun -N 4 -n 8 hostname: counts %v, want %v", got, want)
		}
	})

	t.Run("salloc", func(t *testing.T) {
		res, err := c.Alloc(ctx, 2, 4, false, "sh", "-c", "env; echo STEP; srun hostname")
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("salloc exit %d: %s", res.ExitCode, res.Stderr)
		}
		envPart, stepPart, _ := strings.Cut(string(res.Stdout), "STEP\n")
		env := envOf([]byte(envPart))
		list := env["SLURM_JOB_NODELIST"]
		if !regexp.MustCompile(`^node\[[0-9]{3}[-,][0-9]{3}\]$`).MatchString(list) {
			t.Errorf("SLURM_JOB_NODELIST = %q, want hostlist syntax node[NNN-NNN] or node[NNN,NNN]", list)
		}
		nodes := expandHostlist(t, list)
		if len(nodes) != 2 {
			t.Fatalf("SLURM_JOB_NODELIST %q expands to %v, want 2 nodes", list, nodes)
		}
		for _, n := range nodes {
			if !slices.Contains(c.Nodes(), n) {
				t.Errorf("SLURM_JOB_NODELIST names %s, not a compute node", n)
			}
		}
		if got := env["SLURM_TASKS_PER_NODE"]; got != "2(x2)" {
			t.Errorf("SLURM_TASKS_PER_NODE = %q, want 2(x2)", got)
		}
		if got := env["SLURM_NTASKS"]; got != "4" {
			t.Errorf("SLURM_NTASKS = %q, want 4", got)
		}
		if got := env["SLURM_JOB_NUM_NODES"]; got != "2" {
			t.Errorf("SLURM_JOB_NUM_NODES = %q, want 2", got)
		}
		if got := env["SLURM_CONF"]; got != c.ConfPath() {
			t.Errorf("SLURM_CONF = %q, want %q", got, c.ConfPath())
		}
		// The step's tasks run on exactly the allocated nodes, two each.
		got := map[string]int{}
		for _, h := range strings.Fields(stepPart) {
			got[h]++
		}
		if len(got) != 2 || got[nodes[0]] != 2 || got[nodes[1]] != 2 {
			t.Errorf("srun hostname in the allocation: %v, want 2 tasks on each of %v", got, nodes)
		}
	})

	t.Run("exit code", func(t *testing.T) {
		res, err := c.Alloc(ctx, 1, 0, false, "sh", "-c", "exit 3")
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 {
			t.Errorf("exit code %d, want 3 (stderr %s)", res.ExitCode, res.Stderr)
		}
	})

	t.Run("down leaves nothing", func(t *testing.T) {
		procs, err := procsOfCluster(c.Config().Cluster)
		if err != nil {
			t.Fatal(err)
		}
		// Every daemon is among the processes found by namespace.
		for _, d := range ds {
			if !slices.ContainsFunc(procs, func(p proc) bool { return p.PID == d.PID }) {
				t.Errorf("daemon %+v not found in the cluster's namespaces", d)
			}
		}
		start := time.Now()
		if err := c.Down(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("down in %v", time.Since(start).Round(time.Millisecond))
		for _, p := range procs {
			if p.alive() {
				t.Errorf("process %d still runs after Down", p.PID)
			}
		}
		if ns, _ := clusterNetns(c.Config().Cluster); len(ns) > 0 {
			t.Errorf("namespaces left: %v", ns)
		}
		if _, err := os.Stat(c.Dir()); !os.IsNotExist(err) {
			t.Errorf("slurm directory %s left: %v", c.Dir(), err)
		}
		if err := c.Down(ctx); err != nil {
			t.Errorf("second Down: %v", err)
		}
	})
}

// TestNodeCrashNoKill crashes a node (cluster.Kill) while a `salloc
// --no-kill` allocation runs a step on all four nodes, and checks what Slurm
// reports: nothing at first; after about SlurmdTimeout the node is DOWN, the
// job lives on without it, and srun -k ends with a "Node failure" line.
func TestNodeCrashNoKill(t *testing.T) {
	requireSlurm(t)
	t.Parallel()
	cfg := testConfig(t)
	cfg.SlurmdTimeout = 6 * time.Second
	c := upTest(t, cfg, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir, err := os.MkdirTemp(c.Dir(), "crash-")
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	script := fmt.Sprintf(`echo $SLURM_JOB_ID > %[1]s/job
srun -k -N 4 -n 4 sh -c 'hostname; touch %[1]s/ready.$(hostname); while [ ! -e %[1]s/go ]; do sleep 0.05; done; echo after $(hostname)'
echo $? > %[1]s/srun.tmp && mv %[1]s/srun.tmp %[1]s/srun
while [ ! -e %[1]s/end ]; do sleep 0.05; done`, dir)
	cmd, err := c.AllocCommand(ctx, 4, 4, true, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			os.WriteFile(f("end"), nil, 0o644)
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	waitFor(t, 30*time.Second, "all four tasks running", func() error {
		m, _ := filepath.Glob(f("ready.*"))
		if len(m) != 4 {
			return fmt.Errorf("%d tasks ready; salloc stderr: %s", len(m), stderr.String())
		}
		return nil
	})
	b, err := os.ReadFile(f("job"))
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(string(b))

	killed := time.Now()
	if err := c.Kill(ctx, "node004"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f("go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// Right after the crash Slurm shows nothing: the node is still
	// allocated to the job, not DOWN (that takes about SlurmdTimeout).
	states, err := c.NodeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jobNodes := squeueNodes(ctx, t, c, job)
	t.Logf("%v after the crash: sinfo %s, job %s %s", time.Since(killed).Round(time.Millisecond), formatStates(states), job, jobNodes)
	if s := states["node004"]; strings.HasPrefix(s, "down") || strings.HasPrefix(s, "idle") {
		t.Errorf("node004 is %q right after the crash; Slurm should not know yet", s)
	}
	if jobNodes != "RUNNING node[001-004]" {
		t.Errorf("job right after the crash: %q, want RUNNING node[001-004]", jobNodes)
	}

	// The survivors finish; srun -k waits for node004 until slurmctld sets it
	// DOWN, then exits 0.
	waitFor(t, 20*cfg.SlurmdTimeout, "srun -k to end", func() error {
		if _, err := os.Stat(f("srun")); err != nil {
			return fmt.Errorf("srun still runs; stdout %q", stdout.String())
		}
		return nil
	})
	ended := time.Since(killed)
	states, err = c.NodeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v after the crash srun -k ended: sinfo %s", ended.Round(time.Millisecond), formatStates(states))
	if s := states["node004"]; s != "down*" {
		t.Errorf("node004 is %q once srun -k ended, want down*", s)
	}
	if ended < cfg.SlurmdTimeout {
		t.Errorf("srun -k ended %v after the crash, before SlurmdTimeout %v", ended, cfg.SlurmdTimeout)
	}
	if b, _ := os.ReadFile(f("srun")); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("srun -k exit code %q, want 0", strings.TrimSpace(string(b)))
	}
	for _, n := range []string{"node001", "node002", "node003"} {
		if !strings.Contains(stdout.String(), "after "+n) {
			t.Errorf("survivor %s did not finish; stdout %q", n, stdout.String())
		}
	}
	// The --no-kill job lives on without the lost node.
	if got := squeueNodes(ctx, t, c, job); got != "RUNNING node[001-003]" {
		t.Errorf("job after node004 went DOWN: %q, want RUNNING node[001-003]", got)
	}
	// The dead step still holds its CPUs on the survivors (it never
	// completes on node004), so a new step needs --overlap.
	out, err := c.Run(ctx, "srun", "--jobid="+job, "--overlap", "-N", "3", "-n", "3", "hostname")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); len(got) != 3 || slices.Contains(got, "node004") {
		t.Errorf("srun --overlap on the survivors: %v", got)
	}

	if err := os.WriteFile(f("end"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waited = true
	if err := cmd.Wait(); err != nil {
		t.Errorf("salloc: %v; stderr %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Node failure on node004") {
		t.Errorf("no node failure line on stderr: %q", stderr.String())
	}

	// A revived node comes back (ReturnToService=2).
	if err := c.Revive(ctx, "node004"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitNodeStates(ctx, 30*time.Second, func(s map[string]string) bool { return s["node004"] == "idle" }); err != nil {
		t.Fatal(err)
	}
}

// TestNodeCrashDefaultAlloc is the contrast to TestNodeCrashNoKill: in an
// allocation made without --no-kill, Slurm ends the whole job, survivors
// included, once it sets the crashed node DOWN.
func TestNodeCrashDefaultAlloc(t *testing.T) {
	requireSlurm(t)
	t.Parallel()
	cfg := testConfig(t)
	cfg.SlurmdTimeout = 6 * time.Second
	c := upTest(t, cfg, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir, err := os.MkdirTemp(c.Dir(), "crash-")
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	script := fmt.Sprintf(`echo $SLURM_JOB_ID > %[1]s/job
srun -N 4 -n 4 sh -c 'touch %[1]s/ready.$(hostname); while [ ! -e %[1]s/end ]; do sleep 0.05; done'
echo $? > %[1]s/srun.tmp && mv %[1]s/srun.tmp %[1]s/srun`, dir)
	cmd, err := c.AllocCommand(ctx, 4, 4, false, "sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(f("end"), nil, 0o644)
		cmd.Wait()
	}()
	waitFor(t, 30*time.Second, "all four tasks running", func() error {
		m, _ := filepath.Glob(f("ready.*"))
		if len(m) != 4 {
			return fmt.Errorf("%d tasks ready; salloc stderr: %s", len(m), stderr.String())
		}
		return nil
	})
	b, err := os.ReadFile(f("job"))
	if err != nil {
		t.Fatal(err)
	}
	job := strings.TrimSpace(string(b))
	killed := time.Now()
	if err := c.Kill(ctx, "node004"); err != nil {
		t.Fatal(err)
	}
	// The survivors' tasks would run forever; Slurm ends them.
	waitFor(t, 20*cfg.SlurmdTimeout, "the step to end", func() error {
		if _, err := os.Stat(f("srun")); err != nil {
			return fmt.Errorf("srun still runs; stderr %q", stderr.String())
		}
		return nil
	})
	ended := time.Since(killed)
	states, err := c.NodeStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(f("srun"))
	code := strings.TrimSpace(string(b))
	t.Logf("%v after the crash the step ended with exit code %s: sinfo %s", ended.Round(time.Millisecond), code, formatStates(states))
	if code == "0" {
		t.Errorf("srun exit code 0; want the step killed")
	}
	if states["node004"] != "down*" {
		t.Errorf("node004 is %q once the step ended, want down*", states["node004"])
	}
	if ended < cfg.SlurmdTimeout {
		t.Errorf("step ended %v after the crash, before SlurmdTimeout %v", ended, cfg.SlurmdTimeout)
	}
	if got := squeueNodes(ctx, t, c, job); strings.HasPrefix(got, "RUNNING") {
		t.Errorf("job after node004 went DOWN: %q, want it ended", got)
	}
	if !strings.Contains(stderr.String(), "Node failure on node004") {
		t.Errorf("no node failure line on stderr: %q", stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a command's output goroutine and
// the test reading it at once.
type syncBuffer = testbuf.Buffer

// squeueNodes returns "STATE NODELIST" of a job.
func squeueNodes(ctx context.Context, t *testing.T, c *Cluster, job string) string {
	t.Helper()
	out, err := c.Run(ctx, "squeue", "--noheader", "--jobs="+job, "--format=%T %N")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
