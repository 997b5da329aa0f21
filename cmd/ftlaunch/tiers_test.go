package main

import (
	"os"
	"testing"
)

// The test tiers of the command's package. The default suite (make test)
// keeps one end-to-end case per promise a user sees; a case whose promise
// another end-to-end case or a test below the binary already guards
// (the planner's tables in recovery, the in-process harness in launch,
// the package's own tests) runs under make test-e2e, which sets
// FTLAUNCH_E2E=1 and runs every case.

// e2eOnly skips t in the default suite. guard names what keeps its
// promise there (a test or a package): the reader of a skipped test
// learns where its behaviour is checked on every run.
func e2eOnly(t *testing.T, guard string) {
	t.Helper()
	if os.Getenv("FTLAUNCH_E2E") == "" {
		t.Skipf("make test-e2e (FTLAUNCH_E2E=1) runs it; the default suite's guard: %s", guard)
	}
}
