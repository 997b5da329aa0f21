package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/launch"
)

// The multi-host tests run ftlaunch against an emulated cluster: network
// namespaces on one bridge, each with a real OpenSSH sshd (chaos/cluster).
// They skip where namespaces cannot be created.

// sleepers counts live `sleep M` processes (not the ftlaunch command
// lines that mention them).
func sleepers(t *testing.T, m string) int {
	n := 0
	for _, p := range liveProcesses(t, "sleep "+m) {
		if _, cmdline, _ := strings.Cut(p, " "); strings.HasPrefix(cmdline, "sleep ") {
			n++
		}
	}
	return n
}

func hostfile(t *testing.T, c *cluster.Cluster, slots int) string {
	t.Helper()
	nodes, err := c.Nodes()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "%s slots=%d\n", n.Name, slots)
	}
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClusterLaunch(t *testing.T) {
	c := chaostest.Cluster(t, 8, cluster.Config{})
	hosts := hostfile(t, c, 4)
	ssh := []string{"-l", "--hostfile", hosts, "--ssh-config", c.SSHConfig()} // -l: the checks read rank labels

	// Every kind of launch tree: 8 agents over SSH, some started by others.
	for _, tree := range []string{"auto", "greedy", "flat", "kary:2", "2level", "binomial", "flat --batch 3"} {
		t.Run("tree "+tree, func(t *testing.T) {
			if tree != "auto" {
				e2eOnly(t, "TestTestNodesTreeKinds (kary:2 and binomial on test nodes; every kind under make test-e2e) and tree auto here")
			}
			args := append(append([]string{"run"}, ssh...), append(strings.Fields("--tree "+tree), "-n", "32", ftdemoBin(t))...)
			r := ftlaunch(t, "", args...)
			if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 32 ranks verified") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("tree verbose", func(t *testing.T) {
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "--tree", "kary:2", "--verbose", "-n", "32", "sleep", "1")...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for _, want := range []string{"launcher front-end: init", "launcher node001: init", "its ranks running",
			"6 of 6 standby link(s) to backup parents were up", "calibration: REM", "model: predicted"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("no %q in:\n%s", want, r.stderr)
			}
		}
	})
	t.Run("ssh-agent forwarded down the tree", func(t *testing.T) {
		// A configuration without a usable key file: only the ssh-agent
		// of the front-end holds the key, so interior agents can start
		// their children only through the agent forwarded to them.
		conf, err := os.ReadFile(c.SSHConfig())
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		noKey := filepath.Join(dir, "config")
		text := regexp.MustCompile(`(?m)^(\s*IdentityFile\s+).*$`).ReplaceAllString(string(conf), "${1}"+filepath.Join(dir, "no-such-key"))
		if err := os.WriteFile(noKey, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		key := regexp.MustCompile(`(?m)^\s*IdentityFile\s+(\S+)`).FindStringSubmatch(string(conf))
		if key == nil {
			t.Fatalf("no IdentityFile in %s", c.SSHConfig())
		}
		sock := filepath.Join(dir, "agent.sock")
		agent := exec.Command("ssh-agent", "-D", "-a", sock)
		if err := agent.Start(); err != nil {
			t.Skipf("ssh-agent: %v", err)
		}
		t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
		waitFor(t, "the agent's socket", 5*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })
		args := append([]string{"run", "-l", "--hostfile", hosts, "--ssh-config", noKey, "--tree", "kary:2", "-n", "32"}, ftdemoBin(t))
		// Without the agent the launch fails: the configuration has no key.
		t.Setenv("SSH_AUTH_SOCK", "")
		if r := ftlaunch(t, "", args...); r.code == 0 {
			t.Fatalf("launched without any key:\n%s", r.stderr)
		}
		add := exec.Command("ssh-add", key[1])
		add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
		if out, err := add.CombinedOutput(); err != nil {
			t.Fatalf("ssh-add: %v: %s", err, out)
		}
		t.Setenv("SSH_AUTH_SOCK", sock)
		r := ftlaunch(t, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 32 ranks verified") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("replicas", func(t *testing.T) {
		dir := t.TempDir()
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "--state-dir", dir, "--replicas", "3", "-n", "32", ftdemoBin(t))...)
		if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 32 ranks verified") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		// A job shorter than the group's formation ends without it
		// (docs/state.md): three voters, or inspect names those that
		// never joined.
		r = ftlaunch(t, "", "inspect", "--state-dir", dir)
		formed := strings.Count(r.stdout, "(voter, ") == 3 || strings.Contains(r.stdout, "root replicas that never joined the group: ")
		if r.code != 0 || !formed || !strings.Contains(r.stdout, "invariants: ok") {
			t.Fatalf("inspect: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("front-end killed with replicas", func(t *testing.T) {
		e2eOnly(t, "TestRootFailoverDuringRun (the takeover on test nodes) and replicas here")
		// The job outlives its front-end: a replica agent takes over and
		// attach follows the rest of the job.
		dir := t.TempDir()
		cmd := exec.Command(ftlaunchBin(t), append(append([]string{"run"}, ssh...), "--state-dir", dir, "--replicas", "3", "--verbose",
			"-n", "32", "sh", "-c", "sleep 3; echo done $FTLAUNCH_RANK")...)
		errb := &syncBuffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		replicasJoined(t, dir, 2, 20*time.Second)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		r := ftlaunch(t, "", "attach", "--state-dir", dir)
		if r.code != 0 || strings.Count(r.stdout, "] done ") != 32 {
			t.Fatalf("attach: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		waitGone(t, ftlaunchBin(t)+" agent", 20*time.Second)
	})
	t.Run("interior host crashed mid-run", func(t *testing.T) {
		// kary:2: node001 starts node003 and node004, which start node007
		// and node008 below them.
		m := marker(t)
		cmd := exec.Command(ftlaunchBin(t), append(append([]string{"run"}, ssh...), "--tree", "kary:2", "-n", "32", "--kill-after", "1s", "sleep", m)...)
		errb := &syncBuffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		waitFor(t, "32 ranks", 30*time.Second, func() bool { return sleepers(t, m) == 32 })
		start := time.Now()
		if err := c.Kill(context.Background(), "node001"); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		took := time.Since(start)
		if err == nil || !strings.Contains(errb.String(), "node001") {
			t.Fatalf("after the crash of node001: %v; stderr:\n%s", err, errb.String())
		}
		if took > 15*time.Second {
			t.Errorf("the job took %v to end after the crash", took)
		}
		t.Logf("job ended %v after interior node001 crashed", took)
		waitGone(t, "sleep "+m, 10*time.Second)
		if err := c.Revive(context.Background(), "node001"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("stopped agent fenced from outside", func(t *testing.T) {
		e2eOnly(t, "TestSpareNode (a stopped agent fenced, its ranks on a spare) and launch/fence's tests")
		// A SIGSTOPped agent cannot kill its ranks, which run in sessions
		// of their own, and closing its SSH session tells it nothing: the
		// root declares it lost and fences its host in a new SSH session
		// (ftlaunch agent --fence) before the job's end is reported.
		m := marker(t)
		cmd := exec.Command(ftlaunchBin(t), append(append([]string{"run"}, ssh...), "--tree", "flat", "-n", "32", "--verbose", "sleep", m)...)
		_, errb := startJob(t, cmd)
		waitFor(t, "32 ranks", 30*time.Second, func() bool { return sleepers(t, m) == 32 })
		pid := agentOf(t, m, "node003")
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
		if err := cmd.Wait(); err == nil || !strings.Contains(errb.String(), "fenced node node003") {
			t.Fatalf("after node003's agent stopped: %v; stderr:\n%s", err, errb.String())
		}
		// Nothing is left the moment the job has ended: no waiting here.
		if n := sleepers(t, m); n != 0 {
			t.Fatalf("%d rank(s) still running after the job ended", n)
		}
		if processRunning(pid) {
			t.Fatalf("the stopped agent (pid %d) is still there", pid)
		}
	})

	t.Run("demo", func(t *testing.T) {
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", ftdemoBin(t))...)
		if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 16 ranks verified") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("placement", func(t *testing.T) {
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "8", "--map-by", "node", "sh", "-c",
			`echo "$(hostname) $FTLAUNCH_NODE $FTLAUNCH_LOCAL_RANK/$FTLAUNCH_LOCAL_SIZE"`)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for rank := range 8 {
			node := fmt.Sprintf("node%03d", rank%8+1)
			want := fmt.Sprintf("[%d] %s %s 0/1\n", rank, node, node)
			if !strings.Contains(r.stdout, want) {
				t.Errorf("missing %q in:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("mpich", func(t *testing.T) {
		hello := mpiProgram(t, "mpi_hello")
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", hello)...)
		if r.code != 0 || r.stdout != "[0] hello from 16 ranks, allreduce sum 120 (want 120), bcast 42\n" {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("openmpi", func(t *testing.T) {
		// #30: Open MPI programs, unmodified, over SSH: a PMIx server in
		// every host's agent, fences through the tree.
		e2eOnly(t, "TestOpenMPI/n4_nodes2 (the same programs over two test nodes)")
		hello, ring := openMPIProgram(t, "mpi_hello"), openMPIProgram(t, "mpi_ring")
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", hello)...)
		if r.code != 0 || r.stdout != "[0] hello from 16 ranks, allreduce sum 120 (want 120), bcast 42\n" {
			t.Fatalf("hello: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		r = ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", ring, "3")...)
		if r.code != 0 || r.stdout != "[0] ring of 16 ranks, 3 rounds: token 360 (want 360)\n" {
			t.Fatalf("ring: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("calibration", func(t *testing.T) {
		e2eOnly(t, "TestCalibrationKept")
		// The launches above kept their measurements (the tests' own
		// cache, XDG_CACHE_HOME); plan shows them.
		c, err := launch.LoadCalibration("ssh")
		if err != nil || c == nil || c.Agents != 4 || len(c.Window) == 0 {
			t.Fatalf("kept calibration: %+v, %v; want the last launch's 4 agents", c, err)
		}
		r := ftlaunch(t, "", "plan", "--calibrated")
		if r.code != 0 || r.stdout == "" {
			t.Fatalf("plan --calibrated: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = ftlaunch(t, "", "plan", "--nodes", "5", "--json")
		if r.code != 0 || strings.Contains(r.stdout, `"rem":0.034,`) {
			t.Fatalf("plan --nodes 5 did not use the calibration: %s%s", r.stdout, r.stderr)
		}
	})
	t.Run("failure", func(t *testing.T) {
		m := marker(t)
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", "--kill-after", "1s", "sh", "-c",
			"[ $FTLAUNCH_RANK = 9 ] && exit 4; sleep "+m)...)
		if r.code != 4 || !strings.Contains(r.stderr, "rank 9 on node node003") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
		waitGone(t, "sleep "+m, 5*time.Second)
	})
	t.Run("front-end killed", func(t *testing.T) {
		m := marker(t)
		cmd := exec.Command(ftlaunchBin(t), append(append([]string{"run"}, ssh...), "-n", "16", "sleep", m)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "16 ranks", 20*time.Second, func() bool { return sleepers(t, m) == 16 })
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		waitGone(t, "sleep "+m, 10*time.Second)
		waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
	})
	t.Run("host crashed mid-run", func(t *testing.T) {
		e2eOnly(t, "interior host crashed mid-run here")
		m := marker(t)
		cmd := exec.Command(ftlaunchBin(t), append(append([]string{"run"}, ssh...), "-n", "16", "--kill-after", "1s", "sleep", m)...)
		errb := &syncBuffer{}
		cmd.Stderr = errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		waitFor(t, "16 ranks", 20*time.Second, func() bool { return sleepers(t, m) == 16 })
		start := time.Now()
		if err := c.Kill(context.Background(), "node002"); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		took := time.Since(start)
		if err == nil || !strings.Contains(errb.String(), "node002") {
			t.Fatalf("after the crash of node002: %v; stderr:\n%s", err, errb.String())
		}
		if took > 15*time.Second {
			t.Errorf("the job took %v to end after the crash", took)
		}
		t.Logf("job ended %v after node002 crashed", took)
		waitGone(t, "sleep "+m, 5*time.Second)
	})
	t.Run("host down at launch", func(t *testing.T) {
		e2eOnly(t, "node002 is down only after host crashed mid-run, which make test-e2e runs; TestBadInput (an unknown host)")
		// node002 is still down from the previous case.
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "-n", "16", "true")...)
		// One line naming the host, then where the job's state log is.
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code == 0 || !strings.Contains(lines[0], "node002") || len(lines) != 2 || !strings.Contains(lines[1], "state in") {
			t.Fatalf("exit %d; want one line naming node002, then the state line:\n%s", r.code, r.stderr)
		}
		if r.elapsed > 10*time.Second {
			t.Errorf("took %v with a 2 s connect timeout", r.elapsed)
		}
		waitGone(t, ftlaunchBin(t)+" agent", 5*time.Second)
	})
}

// TestClusterLarge is issue #4's acceptance run: 16 hosts, 64 ranks, every
// tree kind and --batch 4, then a crashed host at launch. It runs under
// `make test-cluster-large` (FTLAUNCH_CLUSTER_LARGE=1).
func TestClusterLarge(t *testing.T) {
	if os.Getenv("FTLAUNCH_CLUSTER_LARGE") == "" {
		t.Skip("set FTLAUNCH_CLUSTER_LARGE=1 (make test-cluster-large) for the 16-host runs")
	}
	c := chaostest.Cluster(t, 16, cluster.Config{})
	hosts := hostfile(t, c, 4)
	ssh := []string{"-l", "--hostfile", hosts, "--ssh-config", c.SSHConfig()} // -l: the checks read rank labels
	for _, tree := range []string{"auto", "greedy", "flat", "kary:2", "kary:4", "2level", "binomial", "auto --batch 4", "flat --batch 4"} {
		t.Run("tree "+tree, func(t *testing.T) {
			args := append(append([]string{"run"}, ssh...), append(strings.Fields("--tree "+tree), "-n", "64", ftdemoBin(t))...)
			r := ftlaunch(t, "", args...)
			if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 64 ranks verified") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			t.Logf("%s: %v", tree, r.elapsed)
		})
	}
	t.Run("exit codes", func(t *testing.T) {
		r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "--tree", "binomial", "-n", "64", "sh", "-c",
			"[ $FTLAUNCH_RANK = 61 ] && exit 9; exit 0")...)
		if r.code != 9 || !strings.Contains(r.stderr, "rank 61 on node node016 exited with code 9") {
			t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("host down at launch", func(t *testing.T) {
		if err := c.Kill(context.Background(), "node006"); err != nil {
			t.Fatal(err)
		}
		for _, tree := range []string{"kary:2", "binomial", "flat"} {
			r := ftlaunch(t, "", append(append([]string{"run"}, ssh...), "--tree", tree, "-n", "64", "true")...)
			if r.code == 0 || !strings.Contains(r.stderr, "node006") {
				t.Fatalf("%s: exit %d; want node006 named:\n%s", tree, r.code, r.stderr)
			}
			if r.elapsed > 15*time.Second {
				t.Errorf("%s: took %v with a 2 s connect timeout", tree, r.elapsed)
			}
			waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
		}
	})
}
