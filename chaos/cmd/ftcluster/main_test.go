package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	cases := [][]string{
		{},
		{"frobnicate"},
		{"-prefix", "not-a-prefix", "status"},
		{"kill"},
		{"kill", "node001", "node002"},
		{"exec", "node001"},
		{"up", "-n", "x"},
		{"up", "extra"},
		{"slow", "node001"},
		{"slow", "node001", "soon"},
		{"slow", "node001", "1ms", "much"},
	}
	for _, args := range cases {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("ftcluster %q: exit %d, want 2", args, code)
		}
	}
	state := t.TempDir()
	if code, _, errs := runCmd(t, "-state", state, "-name", "none", "status"); code != 1 || !strings.Contains(errs, "no cluster state") {
		t.Errorf("status of a missing cluster: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd(t, "-state", state, "-name", "BAD", "down"); code != 1 || !strings.Contains(errs, "cluster name") {
		t.Errorf("down with a bad name: exit %d, %q", code, errs)
	}
}

// TestFlow drives a two-node cluster through the command. It needs root,
// network namespaces and sshd, and skips otherwise.
func TestFlow(t *testing.T) {
	probe := fmt.Sprintf("ftcmdprobe%d", os.Getpid())
	if err := exec.Command("ip", "netns", "add", probe).Run(); err != nil {
		t.Skipf("cannot create network namespaces here: %v", err)
	}
	if err := exec.Command("ip", "netns", "del", probe).Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("sshd not installed; run chaos/install-deps.sh")
	}
	name := fmt.Sprintf("c%06x", os.Getpid()&0xffffff)
	g := []string{"-state", t.TempDir(), "-name", name, "-prefix", fmt.Sprintf("10.%d.%d.0/28", 200+os.Getpid()%50, os.Getpid()/50%256)}
	t.Cleanup(func() { runCmd(t, append(g, "down")...) })

	if code, out, errs := runCmd(t, append(g, "up", "-n", "2")...); code != 0 || !strings.Contains(out, "2 nodes up") {
		t.Fatalf("up: exit %d, %q, %q", code, out, errs)
	}
	code, out, errs := runCmd(t, append(g, "exec", "node002", "hostname")...)
	if code != 0 || strings.TrimSpace(out) != "node002" {
		t.Errorf("exec hostname: exit %d, %q, %q", code, out, errs)
	}
	if code, _, _ := runCmd(t, append(g, "exec", "node001", "sh", "-c", "exit 7")...); code != 7 {
		t.Errorf("exec exit 7: exit %d", code)
	}
	if code, _, errs := runCmd(t, append(g, "kill", "node002")...); code != 0 {
		t.Fatalf("kill: exit %d, %q", code, errs)
	}
	code, out, _ = runCmd(t, append(g, "status")...)
	if code != 0 || !strings.Contains(out, "node002") || !strings.Contains(out, "killed") {
		t.Errorf("status after kill: exit %d\n%s", code, out)
	}
	if code, _, errs := runCmd(t, append(g, "heal", "node002")...); code != 1 || !strings.Contains(errs, "Revive") {
		t.Errorf("heal of killed node: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd(t, append(g, "revive", "node002")...); code != 0 {
		t.Fatalf("revive: exit %d, %q", code, errs)
	}
	if code, out, _ := runCmd(t, append(g, "env")...); code != 0 || !strings.Contains(out, "FTCLUSTER_SSH_CONFIG=") {
		t.Errorf("env: exit %d, %q", code, out)
	}
	if code, _, errs := runCmd(t, append(g, "down")...); code != 0 {
		t.Errorf("down: exit %d, %q", code, errs)
	}
	if code, _, _ := runCmd(t, append(g, "status")...); code != 1 {
		t.Errorf("status after down: exit %d, want 1", code)
	}
}
