package harness

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReplayCommand: the replay line, split by a POSIX shell, gives back
// every argument as it was (an application's `sh -c 'sleep 3; exit 3'`
// stays one word), with every flag that shaped the trial.
func TestReplayCommand(t *testing.T) {
	o := &Options{Cluster: "test-nodes", Nodes: 4, PPN: 2, When: "run", Concurrent: 1, Restart: "rank", Replicas: 3, Tree: "kary:2",
		Steps: 100, Interval: time.Second, Faults: "rank,agent", Strict: true, TrialLimit: 90 * time.Second, Out: "/tmp/chaos out",
		App: "/bin/sh", AppArgs: []string{"-c", "sleep 3; exit 3", "it's"}}
	line := replayCommand(o, 42)
	out, err := exec.Command("sh", "-c", `for a in `+line+`; do printf '%s\n' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("sh: %v on %s", err, line)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	for _, want := range [][]string{{"--seed", "42"}, {"--strict"}, {"--trial-timeout", "1m30s"}, {"--out", "/tmp/chaos out"},
		{"--faults", "rank,agent"}, {"--app", "/bin/sh", "--", "-c", "sleep 3; exit 3", "it's"}} {
		i := slices.Index(got, want[0])
		if i < 0 || i+len(want) > len(got) || !slices.Equal(got[i:i+len(want)], want) {
			t.Errorf("replay line %s: want %q in %q", line, want, got)
		}
	}
}
