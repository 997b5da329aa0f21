package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/cluster"
	"github.com/ftlaunch/ftlaunch/chaos/slurm"
)

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"up", "extra"},
		{"up", "-n"},
		{"run"},
		{"kill"},
		{"status", "x"},
		{"-prefix", "nonsense", "status"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(""), &out, &errb); code != 2 {
			t.Errorf("ftslurm %q: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
	}
}

// requireSlurm skips unless network namespaces can be created here and
// sshd, Slurm and munge are installed.
func requireSlurm(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	probe := fmt.Sprintf("ftsprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		t.Skipf("cannot create network namespaces here (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		t.Fatalf("remove probe namespace: %v: %s", err, out)
	}
	for _, p := range []string{cluster.DefaultSSHD, slurm.DefaultSlurmctld, slurm.DefaultSlurmd, slurm.DefaultMunged} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s not installed; run chaos/install-deps.sh and chaos/install-slurm-deps.sh", p)
		}
	}
}

func TestUpRunDown(t *testing.T) {
	requireSlurm(t)
	root, err := os.MkdirTemp("", "ftslurm-cmd-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil { // munged wants its socket's directories executable by all
		t.Fatal(err)
	}
	b := make([]byte, 3)
	rand.Read(b)
	x, _ := rand.Int(rand.Reader, big.NewInt(50*256))
	global := []string{"-name", "c" + hex.EncodeToString(b), "-state", root,
		"-prefix", fmt.Sprintf("10.%d.%d.0/24", 200+x.Int64()/256, x.Int64()%256)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ftslurm := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		code := run(ctx, append(append([]string{}, global...), args...), strings.NewReader(""), &out, &errb)
		return out.String() + errb.String(), code
	}
	defer ftslurm("down")

	if out, code := ftslurm("up", "-n", "2"); code != 0 {
		t.Fatalf("up: exit %d: %s", code, out)
	}
	out, code := ftslurm("run", "srun", "-N", "2", "hostname")
	if code != 0 || strings.Join(strings.Fields(sortLines(out)), " ") != "node001 node002" {
		t.Errorf("run srun -N 2 hostname: exit %d, output %q", code, out)
	}
	if _, code := ftslurm("run", "sh", "-c", "exit 5"); code != 5 {
		t.Errorf("run sh -c 'exit 5': exit %d, want 5", code)
	}
	out, code = ftslurm("status")
	if code != 0 || !strings.Contains(out, "slurmctld:") || strings.Count(out, "slurmd:") != 2 || !strings.Contains(out, "idle") {
		t.Errorf("status: exit %d:\n%s", code, out)
	}
	if out, code := ftslurm("down"); code != 0 {
		t.Fatalf("down: exit %d: %s", code, out)
	}
	if out, code := ftslurm("status"); code == 0 {
		t.Errorf("status after down: exit 0:\n%s", out)
	}
}

func sortLines(s string) string {
	lines := strings.Fields(s)
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
