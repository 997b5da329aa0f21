package main

import (
	"crypto/rand"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/harness"
)

// lastLine is the last line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// A short chaos run: three trials on four test nodes, each killing a rank,
// an interior agent or the front-end, all passing every invariant.
func TestChaosShort(t *testing.T) {
	out := t.TempDir()
	r := ftlaunchLimit(t, 150*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "4", "--trials", "3",
		"--seed", "5", "--faults", "rank,interior,root", "--steps", "10", "--out", out)
	t.Logf("chaos took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "3 passed, 0 failed" {
		t.Fatalf("exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
	if kept, _ := filepath.Glob(filepath.Join(out, "*", "trial-*")); len(kept) != 0 {
		t.Errorf("passing trials kept their directories: %v", kept)
	}
	// With three root replicas, losing one ends the job, and the two
	// replicas left agree.
	r = ftlaunchLimit(t, 150*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "4", "--trials", "1",
		"--seed", "6", "--replicas", "3", "--faults", "replica", "--steps", "10", "--out", out)
	t.Logf("chaos --replicas 3 took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "1 passed, 0 failed" {
		t.Fatalf("--replicas 3: exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
}

// Under --restart rank, a rank's loss is recovered: the recovery
// application's job completes with the right checksum, and the trial
// reports the recovery; a lost agent is started again, interior (its
// children move to their backup parents) or a leaf under the root.
func TestChaosRestartRank(t *testing.T) {
	e2eOnly(t, "TestChaosShort (the harness end to end) and chaos/trial.TestScheduleRecovery")
	out := t.TempDir()
	r := ftlaunchLimit(t, 150*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "4", "--trials", "2",
		"--seed", "6", "--restart", "rank", "--faults", "rank,interior", "--when", "run", "--steps", "10", "--out", out)
	t.Logf("chaos --restart rank took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "2 passed, 0 failed" {
		t.Fatalf("exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
	if !regexp.MustCompile(`recovery of rank \d+: resumed, \d+\.\d+s after the failure`).MatchString(r.stdout) {
		t.Errorf("no trial recovered a rank:\n%s", r.stdout)
	}
	// On a flat tree a lost leaf agent is started again and its ranks
	// with it.
	r = ftlaunchLimit(t, 150*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "3", "--tree", "flat", "--trials", "1",
		"--seed", "6", "--restart", "rank", "--faults", "leaf", "--when", "run", "--steps", "10", "--out", out)
	t.Logf("chaos --tree flat --faults leaf took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "1 passed, 0 failed" || !regexp.MustCompile(`recovery of node node\d: resumed`).MatchString(r.stdout) {
		t.Fatalf("a lost leaf: exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
}

// The application kinds of #26, end to end on test nodes: a plain shell
// loop under --restart rank with an agent lost during the launch (its
// ranks started again alone: every done line once), and MPICH's checkpoint
// program under --restart job with an interior agent killed in the run
// (the job restarted from its checkpoints, the checksum right).
func TestChaosAppKinds(t *testing.T) {
	e2eOnly(t, "chaos/harness.TestAppResult and TestAppCommand, chaos/trial.TestExpectPrograms, TestParseChaosAppKind, TestChaosShort")
	out := t.TempDir()
	r := ftlaunchLimit(t, 150*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "4", "--trials", "1", "--seed", "6",
		"--app-kind", "shell", "--restart", "rank", "--faults", "agent", "--when", "launch", "--steps", "10", "--out", out)
	t.Logf("chaos --app-kind shell took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "1 passed, 0 failed" || !regexp.MustCompile(`recovery of node node\d: resumed`).MatchString(r.stdout) {
		t.Fatalf("shell under rank: exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
	if _, err := exec.LookPath("mpicc.mpich"); err != nil {
		t.Skip("mpicc.mpich not installed (make deps)")
	}
	r = ftlaunchLimit(t, 240*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "4", "--trials", "1", "--seed", "6",
		"--app-kind", "mpi", "--restart", "job", "--faults", "interior", "--when", "run", "--steps", "10", "--out", out)
	t.Logf("chaos --app-kind mpi took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "1 passed, 0 failed" || !regexp.MustCompile(`recovery of node node\d: restarted`).MatchString(r.stdout) {
		t.Fatalf("MPI under job: exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
}

// The checks can fail: a process planted in the job's directory after the
// job is named as left behind, the trial fails, keeps its state and
// prints how to replay it, and chaos kills the planted process.
func TestChaosPlantedViolation(t *testing.T) {
	e2eOnly(t, "chaos/trial.TestCheckNamesTheInvariant (each invariant fails when broken)")
	out := t.TempDir()
	for _, tc := range []struct{ plant, invariant string }{
		{"leftover", "no-process-left"},
		{"duplicate", "output-unique"},
	} {
		t.Run(tc.plant, func(t *testing.T) {
			t.Setenv(harness.PlantEnv, tc.plant)
			dir := filepath.Join(out, tc.plant)
			r := ftlaunchLimit(t, 120*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "2", "--trials", "1",
				"--seed", "11", "--faults", "rank", "--when", "run", "--steps", "5", "--out", dir)
			if r.code != 1 || lastLine(r.stdout) != "0 passed, 1 failed" {
				t.Fatalf("exit %d, last line %q:\n%s\nstderr:\n%s", r.code, lastLine(r.stdout), r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "FAIL "+tc.invariant+": ") {
				t.Errorf("the failure does not name %s first:\n%s", tc.invariant, r.stdout)
			}
			if !regexp.MustCompile(`replay: \S+ chaos --cluster test-nodes .*--trials 1 --seed 11 `).MatchString(r.stdout) {
				t.Errorf("no replay command:\n%s", r.stdout)
			}
			if dbs, _ := filepath.Glob(filepath.Join(dir, "ftlaunch-chaos-*", "trial-001", "state", "ft-*", "*", "raft.db")); len(dbs) != 1 {
				t.Errorf("the failing trial did not keep its state log: %v", dbs)
			}
			works, _ := filepath.Glob(filepath.Join(dir, "ftlaunch-chaos-*", "trial-001", "work"))
			if len(works) != 1 {
				t.Fatalf("the failing trial's directory: %v", works)
			}
			work, err := filepath.EvalSymlinks(works[0])
			if err != nil {
				t.Fatal(err)
			}
			if left := harness.Leftovers(work); len(left) != 0 {
				t.Errorf("chaos left processes of the trial: %v", left)
			}
		})
	}
}

// On the emulated cluster: a host crash and a partition, each ending the
// job naming the host with nothing of it left on any host, and the
// cluster gone afterwards.
func TestChaosEmulated(t *testing.T) {
	e2eOnly(t, "TestChaosShort (the harness end to end), chaos/cluster's tests (crash and cut) and TestClusterLaunch's interior host crash; make chaos-emulated")
	if testing.Short() {
		t.Skip("an emulated cluster")
	}
	chaostest.RequireNamespaces(t)
	name, prefix := chaosTestCluster(t)
	r := ftlaunchLimit(t, 100*time.Second, "", "chaos", "--cluster", "emulated", "--cluster-name", name, "--cluster-prefix", prefix,
		"--nodes", "3", "--tree", "flat", "--trials", "2", "--seed", "4", "--faults", "node,partition", "--when", "run",
		"--steps", "10", "--out", t.TempDir())
	t.Logf("chaos --cluster emulated took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 0 || lastLine(r.stdout) != "2 passed, 0 failed" {
		t.Fatalf("exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
	for _, f := range []string{"node", "partition"} {
		if !regexp.MustCompile(`fault ` + f + ` node00\d .*detected after`).MatchString(r.stdout) {
			t.Errorf("no %s fault detected:\n%s", f, r.stdout)
		}
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), name+"-") {
		t.Errorf("the cluster's namespaces outlived the run:\n%s", out)
	}
}

// chaosTestCluster is a name and network of the test's own: neither the
// chaos runs' defaults (ftchaos, 10.79.0.0/24; ftspare, 10.81.0.0/24) nor
// the other tests' clusters (10.200-249.x.0/24).
func chaosTestCluster(t *testing.T) (name, prefix string) {
	t.Helper()
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("tch%04x", b), fmt.Sprintf("10.79.%d.0/24", 1+int(b[0])%254)
}

func TestChaosRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--trials", "1"}, "--cluster is required"},
		{[]string{"--cluster", "emulated", "--cluster-prefix", "10.79.0.0"}, "--cluster-prefix"},
		{[]string{"--cluster", "cloud"}, "want test-nodes or emulated"},
		{[]string{"--cluster", "test-nodes", "--faults", "node"}, "needs --cluster emulated"},
		{[]string{"--cluster", "test-nodes", "--faults", "partition"}, "needs --cluster emulated"},
		{[]string{"--cluster", "test-nodes", "--faults", "replica"}, `fault "replica" has no target in the plan`},
		{[]string{"--cluster", "test-nodes", "--tree", "flat", "--faults", "interior"}, `fault "interior" has no target in the plan`},
		{[]string{"--cluster", "test-nodes", "--faults", "raftcut"}, `fault "raftcut" has no target in the plan`},
		{[]string{"--cluster", "test-nodes", "--restart", "always"}, "want none, rank or job"},
		{[]string{"--cluster", "test-nodes", "--tree", "auto"}, "--tree auto"},
		{[]string{"--cluster", "test-nodes", "--faults", "rank,meteor"}, `unknown fault "meteor"`},
		{[]string{"--cluster", "test-nodes", "--when", "later"}, "--when"},
		{[]string{"--cluster", "test-nodes", "--when", "recovery"}, "--when recovery needs --restart rank or job"},
		{[]string{"--cluster", "test-nodes", "--spare-nodes", "1"}, "--spare-nodes needs --restart rank or job"},
	} {
		r := ftlaunch(t, "", append([]string{"chaos"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("chaos %q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.msg)
		}
	}
}
