package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/chaostest"
	"github.com/ftlaunch/ftlaunch/chaos/cluster"
)

// TestClusterMPICHInteriorCrashSpare is issue #26's acceptance on the
// emulated cluster: 8 real-sshd hosts + 1 spare, 16 MPICH ranks of
// testdata/mpi_ckpt under --restart job --spare-nodes 1 --tree kary:2.
// node001, interior under kary:2 (node003 and node004 below it), crashes
// once every rank wrote its first checkpoint: its link goes down, then
// everything in it is SIGKILLed. The agents below it move to their backup
// parents, its agent starts on the spare node009, every rank starts again
// from the checkpoints: exit 0, the right checksum, ranks 0 and 1 (node001's)
// on node009 as incarnation 2, every other rank incarnation 2 on its own
// host, one recovery (the loss of node001) that ran to "restarted", and
// nothing of the job left on any host. make test-recovery.
func TestClusterMPICHInteriorCrashSpare(t *testing.T) {
	longRecovery(t)
	prog := mpiProgram(t, "mpi_ckpt")
	c := chaostest.Cluster(t, 9, cluster.Config{})
	hosts := hostfile(t, c, 2)
	dir, ck := t.TempDir(), t.TempDir()
	// MPICH's ranks poll: 16 of them on two cores make a 10 ms step take
	// ~100 ms, so 300 steps, not more.
	cmd := exec.Command(ftlaunchBin(t), "run", "--verbose", "--hostfile", hosts, "--ssh-config", c.SSHConfig(),
		"--spare-nodes", "1", "--restart", "job", "--tree", "kary:2", "--ppn", "2", "--state-dir", dir, "-n", "16",
		prog, ck, "300", "10")
	out, errb := startJob(t, cmd)
	waitFor(t, "every rank's first checkpoint", 120*time.Second, func() bool {
		for r := range 16 {
			if _, err := os.Stat(filepath.Join(ck, "rank-"+strconv.Itoa(r))); err != nil {
				return false
			}
		}
		return true
	})
	if err := c.Kill(context.Background(), "node001"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Revive(context.Background(), "node001") })
	jobSucceeds(t, cmd, 10*time.Minute)
	if f := strings.Fields(out.String()); len(f) != 6 || f[0] != "steps" || f[1] != "300" || f[3] != f[5] {
		t.Fatalf("wrong result: %q\nstderr:\n%s", out.String(), errb.String())
	}
	var rep struct {
		Status struct {
			Done     bool `json:"done"`
			ExitCode int  `json:"exit_code"`
		} `json:"status"`
		Ranks []struct {
			Rank        int    `json:"rank"`
			Node        string `json:"node"`
			Incarnation uint64 `json:"incarnation"`
		} `json:"ranks"`
		Recoveries []struct {
			Node    string `json:"node"`
			Rank    int    `json:"rank"`
			Outcome string `json:"outcome"`
		} `json:"recoveries"`
	}
	insp := ftlaunch(t, "", "inspect", "--json", "--state-dir", dir)
	if err := json.Unmarshal([]byte(insp.stdout), &rep); err != nil || len(rep.Ranks) != 16 {
		t.Fatalf("inspect --json: %v (%d ranks)\n%s", err, len(rep.Ranks), insp.stdout)
	}
	if !rep.Status.Done || rep.Status.ExitCode != 0 {
		t.Errorf("status %+v, want done with exit code 0", rep.Status)
	}
	for _, r := range rep.Ranks {
		want := fmt.Sprintf("node%03d", r.Rank/2+1)
		if r.Rank < 2 {
			want = "node009"
		}
		if r.Node != want || r.Incarnation != 2 {
			t.Errorf("rank %d: incarnation %d on %s, want 2 on %s", r.Rank, r.Incarnation, r.Node, want)
		}
	}
	if len(rep.Recoveries) != 1 || rep.Recoveries[0].Node != "node001" || rep.Recoveries[0].Rank != -1 || rep.Recoveries[0].Outcome != "restarted" {
		t.Errorf("recoveries %+v, want one: node001 lost, restarted", rep.Recoveries)
	}
	waitGone(t, ck, 10*time.Second)
}
