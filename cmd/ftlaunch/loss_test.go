package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// children lists the processes whose parent is pid (any of its threads).
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppidOf(c) == pid {
			out = append(out, c)
		}
	}
	return out
}

// ppidOf is the parent of pid (field 4 of /proc/PID/stat), or -1.
func ppidOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return -1
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// isAgent reports whether pid runs `ftlaunch agent [NODE] --connect`.
func isAgent(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	return err == nil && len(args) >= 3 && args[1] == "agent" && args[len(args)-1] == "--connect"
}

// TestInteriorAgentLost: an interior agent of the tree is SIGKILLed; the
// job ends naming it, and the ranks of every agent below it (lost with it)
// are reported as failed too, not only its own.
func TestInteriorAgentLost(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--state-dir", dir, "--test-nodes", "6", "--tree", "kary:2", "-n", "12", "sleep", "67")
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// The front-end's children that start agents of their own.
	var victim int
	waitFor(t, "an interior agent with its children", 30*time.Second, func() bool {
		for _, c := range children(cmd.Process.Pid) {
			n := 0
			for _, g := range children(c) {
				if isAgent(g) {
					n++
				}
			}
			if isAgent(c) && n == 2 {
				victim = c
				return true
			}
		}
		return false
	})
	waitFor(t, "every rank running", 30*time.Second, func() bool {
		out, _ := exec.Command("pgrep", "-c", "-f", "^sleep 67$").Output()
		n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return n >= 12
	})
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\n%s", err, errb.String())
	}
	out := errb.String()
	if !strings.Contains(out, "lost the agent of node") || !strings.Contains(out, "6 ranks failed:") {
		t.Fatalf("stderr:\n%s", out)
	}
	if got := strings.Count(out, "lost with its agent"); got != 6 {
		t.Fatalf("%d ranks named as lost with their agent, want 6 (the lost agent's and its two children's):\n%s", got, out)
	}
	r := ftlaunch(t, "", "inspect", "--state-dir", dir)
	if strings.Contains(r.stdout, "every rank ran once") || strings.Count(r.stdout, "failed, exit code 1)") != 6 {
		t.Fatalf("inspect's rank history:\n%s", r.stdout)
	}
	waitGone(t, "sleep 67", 20*time.Second)
}
