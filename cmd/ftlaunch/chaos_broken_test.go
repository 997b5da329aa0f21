package main

import (
	"strings"
	"testing"
	"time"
)

// A deliberately broken recovery fails the trial: with the node table's
// patch sent without its rows (FTLAUNCH_TEST_BREAK_RECOVERY=skip-patch),
// the ranks resume with the replaced rank's old address, the ring cannot
// close, and the trial fails on the job's status, not by luck elsewhere.
func TestChaosBrokenRecovery(t *testing.T) {
	t.Setenv("FTLAUNCH_TEST_BREAK_RECOVERY", "skip-patch")
	out := t.TempDir()
	r := ftlaunchLimit(t, 90*time.Second, "", "chaos", "--cluster", "test-nodes", "--nodes", "3", "--trials", "1",
		"--seed", "1", "--restart", "rank", "--faults", "rank", "--when", "run", "--trial-timeout", "20s", "--out", out)
	t.Logf("chaos with a broken recovery took %v:\n%s", r.elapsed, r.stdout)
	if r.code != 1 || lastLine(r.stdout) != "0 passed, 1 failed" {
		t.Fatalf("exit %d, last line %q; stderr:\n%s", r.code, lastLine(r.stdout), r.stderr)
	}
	if !strings.Contains(r.stdout, "FAIL status: want completed") || !strings.Contains(r.stdout, "replay: ") {
		t.Fatalf("the trial does not fail on its status, or prints no replay:\n%s", r.stdout)
	}
}
