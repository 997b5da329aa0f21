package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/chaos/ringapp"
)

// TestRingAppUnderLauncher runs the application as ftlaunch runs it, with
// real processes and no failure.
func TestRingAppUnderLauncher(t *testing.T) {
	for _, tc := range []struct {
		n, nodes, steps int
		flags           []string
	}{
		{8, 4, 100, nil}, // the job of the brief: ~2 s of 20 ms steps
		{1, 0, 20, []string{"--step-time", "1ms", "--seed", "9"}},
		{2, 0, 21, []string{"--step-time", "1ms", "--checkpoint-every", "3"}},
	} {
		t.Run(fmt.Sprintf("n%d_nodes%d", tc.n, tc.nodes), func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"run", "-n", fmt.Sprint(tc.n)}
			if tc.nodes > 0 {
				args = append(args, "--test-nodes", fmt.Sprint(tc.nodes))
			}
			args = append(args, ftlaunchBin(t), "ringapp", "--steps", fmt.Sprint(tc.steps), "--dir", dir)
			r := ftlaunch(t, "", append(args, tc.flags...)...)
			seed := uint64(1)
			if slices.Contains(tc.flags, "--seed") {
				seed = 9
			}
			e := ringapp.Expected(tc.n, tc.steps, seed)
			if want := fmt.Sprintf("checksum %016x expected %016x\n", e, e); r.code != 0 || r.stdout != want {
				t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr:\n%s", r.code, r.stdout, want, r.stderr)
			}
			if strings.Contains(r.stderr, "ringapp") {
				t.Errorf("the ranks wrote to stderr in a run without failures:\n%s", r.stderr)
			}
			every := 5
			if i := slices.Index(tc.flags, "--checkpoint-every"); i >= 0 {
				fmt.Sscan(tc.flags[i+1], &every)
			}
			if err := ringapp.CheckCheckpoints(dir, tc.n, every, tc.steps, seed); err != nil {
				t.Error(err)
			}
		})
	}
}
