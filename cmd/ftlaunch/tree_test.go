package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// The launch tree on test nodes: local agent processes posing as nodes,
// started by each other as the plan says (the multi-node code path minus
// SSH).

func TestTestNodesTreeKinds(t *testing.T) {
	for _, kind := range []string{"auto", "greedy", "flat", "kary:2", "2level", "binomial"} {
		t.Run(kind, func(t *testing.T) {
			if kind != "kary:2" && kind != "binomial" {
				e2eOnly(t, "TestTestNodesTreeKinds/kary:2 and binomial (a deep tree, uneven fan-outs); topology/plan's tests for every kind's shape")
			}
			r := ftlaunch(t, "", "run", "-l", "-n", "16", "--test-nodes", "8", "--tree", kind, ftdemoBin(t))
			if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 16 ranks verified") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		r := ftlaunch(t, "", "run", "-l", "-n", "8", "--test-nodes", "8", "--tree", "flat", "--batch", "3", "--verbose", ftdemoBin(t))
		if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 8 ranks verified") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "launcher front-end: init") || !strings.Contains(r.stderr, "8 child(ren)") {
			t.Errorf("no launch breakdown for the front-end:\n%s", r.stderr)
		}
		// Every launch checks itself (#33): the prediction beside the
		// measurement, both in seconds, once the last agent is up.
		if !regexp.MustCompile(`model: predicted [0-9]+\.[0-9]{3} s, measured [0-9]+\.[0-9]{3} s \(flat tree;`).MatchString(r.stderr) {
			t.Errorf("no model line:\n%s", r.stderr)
		}
	})
	t.Run("node names and output", func(t *testing.T) {
		r := ftlaunch(t, "", "run", "-l", "-n", "6", "--test-nodes", "3", "--tree", "kary:1", "sh", "-c", `echo "$FTLAUNCH_NODE $FTLAUNCH_NODEID"; exit 0`)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		for rank := range 6 {
			want := fmt.Sprintf("[%d] node%d %d\n", rank, rank/2, rank/2)
			if !strings.Contains(r.stdout, want) {
				t.Errorf("missing %q in:\n%s", want, r.stdout)
			}
		}
	})
}

// Every agent of a deep tree holds a standby link to its backup parent.
func TestTestNodesBackupLinks(t *testing.T) {
	r := ftlaunch(t, "", "run", "-n", "8", "--test-nodes", "8", "--tree", "kary:2", "--verbose", "sleep", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	// kary:2 over the front-end and 8 agents: the agents below the first
	// level (6 of them) have an agent as backup parent.
	if !strings.Contains(r.stderr, "6 of 6 standby link(s) to backup parents were up") {
		t.Errorf("standby links:\n%s", r.stderr)
	}
}

// A rank failing deep in the tree ends the job with its code, and the
// exit of a failing rank is reported through two relays.
func TestTestNodesDeepFailure(t *testing.T) {
	m := marker(t)
	r := ftlaunch(t, "", "run", "-n", "8", "--test-nodes", "8", "--tree", "kary:1", "--kill-after", "1s", "sh", "-c",
		"[ $FTLAUNCH_RANK = 7 ] && exit 5; sleep "+m)
	if r.code != 5 || !strings.Contains(r.stderr, "rank 7 on node node7 exited with code 5") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	waitGone(t, "sleep "+m, 5*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 5*time.Second)
}

// SIGKILL of the front-end: every agent of the tree and every rank goes.
func TestTestNodesFrontendKilled(t *testing.T) {
	m := marker(t)
	cmd := exec.Command(ftlaunchBin(t), "run", "-n", "8", "--test-nodes", "8", "--tree", "binomial", "sleep", m)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "8 ranks", 20*time.Second, func() bool { return len(liveProcesses(t, "sleep "+m)) >= 8 })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	took := waitGone(t, "sleep "+m, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
	t.Logf("ranks gone %v after SIGKILL of the front-end", took)
}

// SIGKILL of an interior agent: the job fails naming its node, and the
// agents below it clean up too.
func TestTestNodesInteriorAgentKilled(t *testing.T) {
	e2eOnly(t, "TestInteriorAgentLost (an interior agent SIGKILLed ends the job under --restart none, naming it, nothing left)")
	m := marker(t)
	cmd := exec.Command(ftlaunchBin(t), "run", "-n", "8", "--test-nodes", "8", "--tree", "kary:1", "--kill-after", "1s", "sleep", m)
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "8 ranks", 20*time.Second, func() bool { return len(liveProcesses(t, "sleep "+m)) >= 8 })
	// kary:1 is a chain: node0 starts node1, which starts node2, ...
	pid := agentOf(t, "sleep "+m, "node2")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if err == nil || !strings.Contains(errb.String(), "lost the agent of node node2") {
		t.Fatalf("after SIGKILL of node2's agent: %v; stderr:\n%s", err, errb.String())
	}
	waitGone(t, "sleep "+m, 10*time.Second)
	waitGone(t, ftlaunchBin(t)+" agent", 10*time.Second)
}

// agentOf returns the pid of the agent of node: the parent of a rank
// process (carrying marker) whose environment says it runs on node.
func agentOf(t *testing.T, marker, node string) int {
	t.Helper()
	for _, p := range rankProcs(t, marker) {
		if p.env["FTLAUNCH_NODE"] != node {
			continue
		}
		if _, ppid, ok := procStat(p.pid); ok {
			return ppid
		}
	}
	t.Fatalf("no rank of %s found", node)
	return 0
}

// rankProc is a live process of a job's ranks (or their children).
type rankProc struct {
	pid int
	env map[string]string
}

// rankProcs returns the live processes with marker in their command line,
// with their environments.
func rankProcs(t *testing.T, marker string) []rankProc {
	t.Helper()
	var out []rankProc
	for _, p := range liveProcesses(t, marker) {
		s, _, _ := strings.Cut(p, " ")
		pid, err := strconv.Atoi(s)
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + s + "/environ")
		if err != nil {
			continue
		}
		vars := map[string]string{}
		for _, kv := range strings.Split(string(env), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				vars[k] = v
			}
		}
		out = append(out, rankProc{pid: pid, env: vars})
	}
	return out
}

// procStat returns a process's state letter (R, S, T, Z, ...) and parent
// pid from /proc/<pid>/stat; ok is false if it is gone.
func procStat(pid int) (state byte, ppid int, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}

// --prestage: the program travels down the tree and every rank runs a
// node-local copy, removed when the job ends.
func TestPrestage(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog.sh")
	// Padding beyond one chunk (1 MiB) so that the copy spans several.
	pad := "# " + strings.Repeat("x", 3<<20) + "\n"
	if err := os.WriteFile(prog, []byte("#!/bin/sh\necho \"$FTLAUNCH_RANK $0\"\nexit 0\n"+pad), 0o755); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "ftlaunch-prestage-*"))
	r := ftlaunch(t, "", "run", "-l", "--prestage", "--test-nodes", "4", "--tree", "kary:1", "-n", "4", prog)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for rank := range 4 {
		prefix := fmt.Sprintf("[%d] %d %s", rank, rank, filepath.Join(os.TempDir(), "ftlaunch-prestage-"))
		if !strings.Contains(r.stdout, prefix) {
			t.Errorf("rank %d did not run a prestaged copy:\n%s", rank, r.stdout)
		}
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "ftlaunch-prestage-*"))
	if len(after) > len(before) {
		t.Errorf("prestaged copies left behind: %v", after)
	}
	r = ftlaunch(t, "", "run", "--prestage", "-n", "1", filepath.Join(dir, "missing"))
	if r.code != 127 {
		t.Errorf("prestage of a missing program: exit %d: %s", r.code, r.stderr)
	}
}

// Collectives are combined inside the tree: with --tree kary:2 over 16
// test nodes (issue #32's acceptance) the root
// receives one message per child (2) for each collective, covering every
// agent, and the ring exchange sends down under a quarter of what the
// node table (an allgather of the same values) does. The line's form is
// the one issue #32 specifies.
//
// The state log's stats say the same (inspect --json's collectives): per
// kind, the collectives answered, the messages at the root, the agents
// they covered and the bytes sent down.
func TestTestNodesCollectivesCombined(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "--state-dir", dir, "--verbose", "-n", "32", "--test-nodes", "16", "--tree", "kary:2", ftdemoBin(t))
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	line := regexp.MustCompile(`\] ([a-z-]+) #(\d+): root received (\d+) message\(s\) covering (\d+) agent\(s\), sent down (\d+) byte\(s\)`)
	down := map[string]int{}
	for _, m := range line.FindAllStringSubmatch(r.stderr, -1) {
		if m[3] != "2" || m[4] != "16" {
			t.Errorf("%s #%s: %s message(s) covering %s agent(s), want 2 covering 16", m[1], m[2], m[3], m[4])
		}
		down[m[1]], _ = strconv.Atoi(m[5])
	}
	if down["publish"] == 0 || down["ring"] == 0 || down["barrier"] == 0 {
		t.Fatalf("collectives seen, with bytes sent down: %v; stderr:\n%s", down, r.stderr)
	}
	if down["ring"]*4 >= down["publish"] {
		t.Errorf("ring sent down %d bytes, the node table %d: not under a quarter", down["ring"], down["publish"])
	}
	in := ftlaunch(t, "", "inspect", "--state-dir", dir, "--json")
	var job struct {
		Collectives []journal.CollTotal `json:"collectives"`
	}
	if err := json.Unmarshal([]byte(in.stdout), &job); err != nil {
		t.Fatalf("inspect: %v\n%s%s", err, in.stdout, in.stderr)
	}
	got := map[string]journal.CollTotal{}
	for _, k := range job.Collectives {
		got[k.Kind] = k
	}
	for _, kind := range []string{"publish", "ring", "barrier"} {
		if k := got[kind]; k.Count != 1 || k.Messages != 2 || k.Agents != 16 || k.BytesDown == 0 {
			t.Errorf("the state log's %s: %+v, want 1 answered from 2 messages covering 16 agents", kind, k)
		}
	}
	if got["ring"].BytesDown*4 >= got["publish"].BytesDown || len(got) != 3 {
		t.Errorf("the state log's collectives: %+v", job.Collectives)
	}
}
