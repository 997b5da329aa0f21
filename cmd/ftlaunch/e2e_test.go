package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/internal/testbuf"

	"github.com/ftlaunch/ftlaunch/launch/client"
	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// The end-to-end tests run the real ftlaunch binary, built once, when a
// test first asks for it (ftlaunchBin), with real processes: a run of the
// package's unit tests alone builds nothing. The test binary doubles as a
// rank program that uses the client library: ftlaunch runs it with
// FTLAUNCH_E2E_RANK set.

// binDir holds the binaries the tests build (TestMain makes and removes it).
var binDir string

// built is one binary built once for the whole test run.
type built struct {
	once sync.Once
	path string
	err  error
}

var ftlaunchBuild, ftdemoBuild built

// get builds pkg into binDir/name with the race detector when the tests
// run with it, once; a failed build fails every test that needs it.
func (b *built) get(t testing.TB, name, pkg string) string {
	t.Helper()
	b.once.Do(func() {
		b.path = filepath.Join(binDir, name)
		args := []string{"build", "-o", b.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		if out, err := exec.Command("go", append(args, pkg)...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// ftlaunchBin is the ftlaunch binary under test, built on first use.
func ftlaunchBin(t testing.TB) string { return ftlaunchBuild.get(t, "ftlaunch", ".") }

// ftdemoBin is the demo application, built on first use.
func ftdemoBin(t testing.TB) string { return ftdemoBuild.get(t, "ftdemo", "../ftdemo") }

func TestMain(m *testing.M) {
	if mode := os.Getenv("FTLAUNCH_E2E_RANK"); mode != "" {
		os.Exit(rankMain(mode))
	}
	if os.Getenv(subreaperEnv) != "" {
		os.Exit(subreaperMain(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "ftlaunch-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	// Calibrations that launches keep go to a cache of the tests' own.
	// The go command's build cache stays where it was: under an empty
	// XDG_CACHE_HOME the test binaries' first build compiled the standard
	// library again (a minute, more with -race, in every run).
	if os.Getenv("GOCACHE") == "" {
		if out, err := exec.Command("go", "env", "GOCACHE").Output(); err == nil {
			os.Setenv("GOCACHE", strings.TrimSpace(string(out)))
		}
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	// Race-built binaries otherwise sleep 1 s at exit; a race in the
	// front-end or an agent makes it exit 66 and fails the test.
	os.Setenv("GORACE", "atexit_sleep_ms=0 halt_on_error=1")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rankMain is the body of the test binary when ftlaunch runs it as a rank.
func rankMain(mode string) int {
	c, err := client.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 3
	}
	rank, size := c.Rank(), c.Size()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "rank %d: "+format+"\n", append([]any{rank}, args...)...)
		return 4
	}
	switch mode {
	case "collectives":
		table, err := c.Publish([]byte("addr-" + strconv.Itoa(rank)))
		if err != nil {
			return fail("publish: %v", err)
		}
		for r, v := range table {
			if string(v) != "addr-"+strconv.Itoa(r) {
				return fail("node table[%d] = %q", r, v)
			}
		}
		if len(c.NodeTable()) != size {
			return fail("NodeTable() has %d entries", len(c.NodeTable()))
		}
		all, err := c.Allgather([]byte{byte(rank)})
		if err != nil {
			return fail("allgather: %v", err)
		}
		for r, v := range all {
			if len(v) != 1 || int(v[0]) != r%256 {
				return fail("allgather[%d] = %v", r, v)
			}
		}
		if err := c.Put("key-"+strconv.Itoa(rank), []byte("val-"+strconv.Itoa(rank))); err != nil {
			return fail("put: %v", err)
		}
		if err := c.Fence(); err != nil {
			return fail("fence: %v", err)
		}
		for r := range size {
			v, err := c.Get("key-" + strconv.Itoa(r))
			if err != nil || string(v) != "val-"+strconv.Itoa(r) {
				return fail("get key-%d = %q, %v", r, v, err)
			}
		}
		if _, err := c.Get("nobody-put-this"); !errors.Is(err, client.ErrNotFound) {
			return fail("get of a missing key: %v", err)
		}
		left, right, err := c.Ring([]byte(strconv.Itoa(rank)))
		if err != nil {
			return fail("ring: %v", err)
		}
		if string(left) != strconv.Itoa((rank-1+size)%size) || string(right) != strconv.Itoa((rank+1)%size) {
			return fail("ring: left %q right %q", left, right)
		}
		if err := c.Barrier(); err != nil {
			return fail("barrier: %v", err)
		}
		info := c.Info()
		fmt.Printf("ok rank=%d size=%d local=%d/%d node=%s nodeid=%d job=%s\n",
			rank, size, info.LocalRank, info.LocalSize, info.Node, info.NodeID, c.JobID())
		return 0
	case "stranded":
		// Rank 0 leaves at once; the others wait for it in a barrier.
		if rank != 0 {
			if err := c.Barrier(); err == nil {
				return fail("barrier completed without rank 0")
			}
		}
		return 0
	case "abort":
		if rank == 1 {
			c.Abort(9, "rank 1 gives up")
		}
		c.Barrier() // never completes: rank 1 does not join
		return 0
	}
	return fail("unknown mode %q", mode)
}

type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// ftlaunch runs the binary to completion (bounded by a generous limit: a
// hang is a failure).
func ftlaunch(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return ftlaunchLimit(t, 60*time.Second, stdin, args...)
}

// ftlaunchLimit is ftlaunch with another limit.
func ftlaunchLimit(t *testing.T, limit time.Duration, stdin string, args ...string) result {
	t.Helper()
	bin := ftlaunchBin(t) // built first: the limit is the run's
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = t.TempDir()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("ftlaunch %q: %v", args, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("ftlaunch %q hung; stderr:\n%s", args, r.stderr)
	}
	return r
}

// liveProcesses lists processes (not zombies) whose command line contains
// marker.
func liveProcesses(t *testing.T, marker string) []string {
	t.Helper()
	return processes(t, func(pid int, cmdline []byte) bool { return bytes.Contains(cmdline, []byte(marker)) })
}

// processes lists the processes (not zombies, not this one) that match
// takes: "pid cmdline".
func processes(t *testing.T, match func(pid int, cmdline []byte) bool) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmdline = bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})
		if err != nil || !match(pid, cmdline) {
			continue
		}
		if state, _, ok := procStat(pid); !ok || state == 'Z' {
			continue
		}
		found = append(found, fmt.Sprintf("%d %s", pid, cmdline))
	}
	return found
}

// waitGone waits until no live process carries marker, failing after limit.
func waitGone(t *testing.T, marker string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		left := liveProcesses(t, marker)
		if len(left) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("processes left after %v: %q", limit, left)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// marker returns a unique sleep duration that identifies this test's
// processes in /proc.
func marker(t *testing.T) string {
	return strconv.Itoa(100000 + int(time.Now().UnixNano()%800000))
}

func TestEchoLabeled(t *testing.T) {
	r := ftlaunch(t, "", "run", "-l", "-n", "8", "sh", "-c", "echo hi $FTLAUNCH_RANK")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 8 {
		t.Fatalf("got %d lines:\n%s", len(lines), r.stdout)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	for i := range 8 {
		if want := fmt.Sprintf("[%d] hi %d", i, i); !seen[want] {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
}

func TestRankEnvironmentAndFlagsAfterProgram(t *testing.T) {
	r := ftlaunch(t, "", "run", "-np", "3", "--label=false", "--env", "FOO=bar", "sh", "-c",
		`echo "$FTLAUNCH_RANK $FTLAUNCH_SIZE $FTLAUNCH_LOCAL_RANK $FTLAUNCH_LOCAL_SIZE $FTLAUNCH_NODEID $FOO $1 $FTLAUNCH_FD" | grep -c . >/dev/null && echo "$FTLAUNCH_RANK $FTLAUNCH_SIZE $FTLAUNCH_LOCAL_RANK $FTLAUNCH_LOCAL_SIZE $FTLAUNCH_NODEID $FOO $1 $FTLAUNCH_FD ${FTLAUNCH_JOBID:+job} ${FTLAUNCH_NODE:+node}"`,
		"sh", "--label")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for i := range 3 {
		want := fmt.Sprintf("%d 3 %d 3 0 bar --label 3 job node", i, i)
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("missing %q in:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "[") {
		t.Errorf("--label=false still labels:\n%s", r.stdout)
	}
}

// TestRankOwnSession checks that every rank leads a session of its own, as
// under Hydra: with autogroup scheduling a session is a CPU-sharing group,
// and ranks sharing the agent's would share its CPU share.
func TestRankOwnSession(t *testing.T) {
	r := ftlaunch(t, "", "run", "-n", "3", "--test-nodes", "2", "--label=false", "sh", "-c",
		`awk -v p=$$ '{ print ($5 == p && $6 == p) ? "own" : "shared pid=" p " pgid=" $5 " sid=" $6 }' /proc/$$/stat`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := strings.Count(r.stdout, "own\n"); got != 3 || strings.Contains(r.stdout, "shared") {
		t.Fatalf("%d of 3 ranks lead their own session:\n%s", got, r.stdout)
	}
}

func TestCollectivesThroughClientLibrary(t *testing.T) {
	for _, tc := range []struct{ n, nodes int }{{1, 0}, {5, 0}, {16, 4}, {7, 3}} {
		t.Run(fmt.Sprintf("n%d_nodes%d", tc.n, tc.nodes), func(t *testing.T) {
			args := []string{"run", "-l", "-n", strconv.Itoa(tc.n), "--env", "FTLAUNCH_E2E_RANK=collectives"}
			if tc.nodes > 0 {
				args = append(args, "--test-nodes", strconv.Itoa(tc.nodes))
			}
			r := ftlaunch(t, "", append(args, os.Args[0])...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr:\n%s\nstdout:\n%s", r.code, r.stderr, r.stdout)
			}
			if got := strings.Count(r.stdout, "] ok rank="); got != tc.n {
				t.Fatalf("%d ranks reported ok, want %d:\n%s", got, tc.n, r.stdout)
			}
			if tc.nodes > 0 && !strings.Contains(r.stdout, fmt.Sprintf("nodeid=%d", tc.nodes-1)) {
				t.Errorf("no rank on the last test node:\n%s", r.stdout)
			}
		})
	}
}

func TestDemoRing(t *testing.T) {
	r := ftlaunch(t, "", "run", "-l", "-n", "8", ftdemoBin(t))
	if r.code != 0 || !strings.Contains(r.stdout, "[0] ring of 8 ranks verified") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestOutputIntact(t *testing.T) {
	const perRank = 100000
	r := ftlaunch(t, "", "run", "-l", "-n", "4", "sh", "-c", "seq 1 "+strconv.Itoa(perRank)+"; printf 'last line without newline'")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	next := make([]int, 4)
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		line := sc.Text()
		var rank int
		var rest string
		if _, err := fmt.Sscanf(line, "[%d]", &rank); err != nil || rank < 0 || rank > 3 {
			t.Fatalf("unlabeled or mixed line %q", line)
		}
		rest = strings.TrimPrefix(line, fmt.Sprintf("[%d] ", rank))
		next[rank]++
		if next[rank] == perRank+1 {
			if rest != "last line without newline" {
				t.Fatalf("rank %d: final line %q", rank, rest)
			}
			continue
		}
		if rest != strconv.Itoa(next[rank]) {
			t.Fatalf("rank %d: line %d is %q", rank, next[rank], rest)
		}
	}
	for r, n := range next {
		if n != perRank+1 {
			t.Errorf("rank %d: %d lines, want %d", r, n, perRank+1)
		}
	}
}

func TestStdinGoesToRankZero(t *testing.T) {
	r := ftlaunch(t, "line one\nline two\n", "run", "-l", "-n", "3", "sh", "-c", `read a; read b; echo "got:$a:$b"`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "[0] got:line one:line two\n") {
		t.Errorf("rank 0 did not get stdin:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "[1] got::\n") || !strings.Contains(r.stdout, "[2] got::\n") {
		t.Errorf("other ranks should see an empty stdin:\n%s", r.stdout)
	}
}

func TestOutputDir(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "-n", "2", "--output-dir", dir, "sh", "-c", "echo out $FTLAUNCH_RANK; echo err $FTLAUNCH_RANK >&2")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for i := range 2 {
		for ext, want := range map[string]string{"out": "out", "err": "err"} {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%d.%s", i, ext)))
			if err != nil || string(b) != fmt.Sprintf("%s %d\n", want, i) {
				t.Errorf("rank.%d.%s = %q, %v", i, ext, b, err)
			}
		}
	}
	if r.stdout != "" {
		t.Errorf("output also went to stdout: %q", r.stdout)
	}
}

func TestFailureTerminatesOthers(t *testing.T) {
	m := marker(t)
	r := ftlaunch(t, "", "run", "-n", "4", "--kill-after", "1s", "sh", "-c", "[ $FTLAUNCH_RANK = 2 ] && exit 7; sleep "+m)
	if r.code != 7 {
		t.Fatalf("exit %d, want 7; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 2 on node") || !strings.Contains(r.stderr, "exited with code 7") {
		t.Errorf("stderr does not name rank 2 and its code:\n%s", r.stderr)
	}
	if r.elapsed > 10*time.Second {
		t.Errorf("took %v", r.elapsed)
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}

func TestIgnoredSIGTERMGetsSIGKILL(t *testing.T) {
	m := marker(t)
	r := ftlaunch(t, "", "run", "-n", "2", "--kill-after", "500ms", "sh", "-c",
		"if [ $FTLAUNCH_RANK = 0 ]; then exit 3; fi; trap '' TERM; sleep "+m+"; sleep "+m)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3: %s", r.code, r.stderr)
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}

// A terminate lost on its way to the agents (the test hook does not send
// it) does not leave the job waiting for ranks nobody told to end: the
// root kills them itself, 5 s past --kill-after.
func TestLostTerminateBounded(t *testing.T) {
	e2eOnly(t, "TestFailureTerminatesOthers (the terminate) and TestIgnoredSIGTERMGetsSIGKILL")
	m := marker(t)
	t.Setenv("FTLAUNCH_TEST_BREAK_RECOVERY", "no-terminate")
	r := ftlaunchLimit(t, 40*time.Second, "", "run", "-n", "2", "--test-nodes", "2", "--kill-after", "500ms", "sh", "-c",
		"[ $FTLAUNCH_RANK = 0 ] && exit 3; sleep "+m)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3; stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "test hook: the terminate is not sent") || !strings.Contains(r.stderr, "1 rank(s) on node(s) ") || !strings.Contains(r.stderr, "killing them") {
		t.Errorf("stderr does not say the rank was killed late:\n%s", r.stderr)
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}

func TestSignalSummary(t *testing.T) {
	r := ftlaunch(t, "", "run", "-n", "3", "sh", "-c", "kill -KILL $$")
	if r.code != 128+9 {
		t.Fatalf("exit %d, want 137: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "killed by signal 9") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	r = ftlaunch(t, "", "run", "-n", "3", "sh", "-c", "exit 5")
	if r.code != 5 || !strings.Contains(r.stderr, "ranks failed:") {
		t.Errorf("exit %d; want 5 and a per-rank summary:\n%s", r.code, r.stderr)
	}
}

func TestAbort(t *testing.T) {
	r := ftlaunch(t, "", "run", "-n", "3", "--env", "FTLAUNCH_E2E_RANK=abort", os.Args[0])
	if r.code != 9 {
		t.Fatalf("exit %d, want 9: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "rank 1 on node") || !strings.Contains(r.stderr, "rank 1 gives up") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

// A rank that exits 0 without joining a collective the others wait in
// fails the job instead of leaving them waiting forever — on its own node
// and on another, and at the top of a chain of agents, where the node that
// strands the collective is the one every other part is combined through.
// The state log says so as a fact (inspect --json's stranded_collectives):
// rank 0 on its node, as its agent found it, or node0 stranding the
// barrier, as the root did.
func TestStrandedCollective(t *testing.T) {
	for _, tc := range []struct {
		tree []string
		rank int    // the rank named (-1: none, the node)
		op   string // the collective named ("": none)
	}{
		{[]string{"--test-nodes", "0"}, 0, ""},
		{[]string{"--test-nodes", "3"}, -1, "barrier"},
		{[]string{"--test-nodes", "3", "--tree", "kary:1"}, -1, "barrier"},
	} {
		dir := t.TempDir()
		args := append([]string{"run", "--state-dir", dir, "-n", "3", "--kill-after", "1s", "--timeout", "60s", "--env", "FTLAUNCH_E2E_RANK=stranded"}, tc.tree...)
		r := ftlaunch(t, "", append(args, os.Args[0])...)
		if r.code == 0 || r.code == 124 {
			t.Fatalf("%v: exit %d; stderr:\n%s", tc.tree, r.code, r.stderr)
		}
		in := ftlaunch(t, "", "inspect", "--state-dir", dir, "--json")
		var job struct {
			Status struct {
				Done     bool `json:"done"`
				ExitCode int  `json:"exit_code"`
			} `json:"status"`
			Stranded []struct {
				Node string `json:"node"`
				Rank int    `json:"rank"`
				Seq  uint64 `json:"seq"`
				Op   string `json:"op"`
			} `json:"stranded_collectives"`
		}
		if err := json.Unmarshal([]byte(in.stdout), &job); err != nil {
			t.Fatalf("%v: inspect: %v\n%s%s", tc.tree, err, in.stdout, in.stderr)
		}
		if !job.Status.Done || job.Status.ExitCode != r.code || len(job.Stranded) != 1 {
			t.Fatalf("%v: status %+v, stranded %+v (exit %d)", tc.tree, job.Status, job.Stranded, r.code)
		}
		s := job.Stranded[0]
		node := s.Node != "" // this machine's name, for its one agent
		if tc.rank < 0 {
			node = s.Node == "node0"
		}
		if !node || s.Rank != tc.rank || s.Op != tc.op || s.Seq != 0 {
			t.Errorf("%v: stranded %+v, want rank %d, collective 0 %q", tc.tree, s, tc.rank, tc.op)
		}
	}
}

func TestGarbageOnRankSocket(t *testing.T) {
	m := marker(t)
	r := ftlaunch(t, "", "run", "-n", "2", "--kill-after", "1s", "sh", "-c",
		"[ $FTLAUNCH_RANK = 1 ] && { echo 'this is not a frame at all' >&3; }; sleep "+m)
	if r.code == 0 || !strings.Contains(r.stderr, "rank 1") || !strings.Contains(r.stderr, "rank protocol") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}

func TestTimeout(t *testing.T) {
	m := marker(t)
	r := ftlaunch(t, "", "run", "-n", "2", "--timeout", "300ms", "--kill-after", "1s", "sleep", m)
	if r.code != 124 || !strings.Contains(r.stderr, "--timeout") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	waitGone(t, "sleep "+m, 3*time.Second)
	t.Setenv("MPIEXEC_TIMEOUT", "1")
	r = ftlaunch(t, "", "run", "sleep", m)
	if r.code != 124 {
		t.Fatalf("MPIEXEC_TIMEOUT: exit %d; stderr:\n%s", r.code, r.stderr)
	}
}

func TestBadInput(t *testing.T) {
	noexec := filepath.Join(t.TempDir(), "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", "-n", "0", "true"}, 2, "-n must be at least 1"},
		{[]string{"run", "-n", "abc", "true"}, 2, `-n "abc": want a whole number`},
		{[]string{"run"}, 2, "no program given"},
		{[]string{"run", "-n", "2"}, 2, "no program given"},
		{[]string{"run", "--bogus", "true"}, 2, "unknown flag --bogus"},
		{[]string{"run", "-bogus", "true"}, 2, "unknown flag -bogus"},
		{[]string{"run", "-n", "2", "./does-not-exist"}, 127, "does-not-exist"},
		{[]string{"run", "no-such-program-anywhere"}, 127, "not found in PATH"},
		{[]string{"run", noexec}, 126, "not executable"},
		{[]string{"run", "--wdir", "/nonexistent/dir", "true"}, 2, "not a directory"},
		{[]string{"run", "--env", "NOEQUALS"}, 2, "VAR=VALUE"},
		{[]string{"run", "--kill-after", "soon", "true"}, 2, "kill-after"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	} {
		r := ftlaunch(t, "", tc.args...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) || len(lines) != 1 {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and one line with %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
}

func TestCalibrationKept(t *testing.T) {
	r := ftlaunch(t, "", "plan", "--calibrated")
	if r.code != 0 {
		t.Fatalf("plan --calibrated: exit %d: %s", r.code, r.stderr)
	}
	t.Logf("%s", r.stdout)
}

func TestHelpAndVersion(t *testing.T) {
	if r := ftlaunch(t, "", "run", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Usage: ftlaunch run") {
		t.Errorf("run --help: exit %d, %q", r.code, r.stdout)
	}
	if r := ftlaunch(t, "", "run", "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "ftlaunch ") {
		t.Errorf("run --version: exit %d, %q", r.code, r.stdout)
	}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer = testbuf.Buffer

// waitFor polls cond until it holds, failing the test after limit.
func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition
	}
}

// startBackground starts ftlaunch and returns once every rank runs.
func startBackground(t *testing.T, m string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(ftlaunchBin(t), args...)
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	waitFor(t, "every rank to start", 20*time.Second, func() bool { return len(liveProcesses(t, "sleep "+m)) >= 4 })
	return cmd, errb
}

// The ranks and their own children (sh runs sleep as a child) go with a
// front-end killed by SIGKILL: with the agent as a process, and with the
// agent in the front-end's process, the default (its orphan guard kills
// them).
func TestFrontEndKilledLeavesNoRank(t *testing.T) {
	for _, inProcess := range []string{"0", ""} {
		t.Run("inprocess="+inProcess, func(t *testing.T) {
			t.Setenv("FTLAUNCH_AGENT_INPROCESS", inProcess)
			m, dir := marker(t), t.TempDir()
			cmd, _ := startBackground(t, m, "run", "--state-dir", dir, "-n", "4", "sh", "-c", "sleep "+m+"; true")
			// The agent tells its guard of a rank right after the rank's
			// fork: a front-end killed in between leaves that rank's own
			// children (docs/design.md). The ranks are reported running
			// (the live report's count) once every one was told of.
			waitLive(t, dir, "the ranks reported running", 20*time.Second, func(l *journal.Live) bool { return l.Running >= 4 })
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			took := waitGone(t, "sleep "+m, 5*time.Second)
			t.Logf("ranks gone %v after SIGKILL of the front-end", took)
			waitGone(t, ftlaunchBin(t)+" agent", 5*time.Second)
		})
	}
}

func TestSignalsForwarded(t *testing.T) {
	m := marker(t)
	cmd, errb := startBackground(t, m, "run", "-n", "4", "sleep", m)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+15 {
		t.Fatalf("after SIGTERM: %v; stderr:\n%s", err, errb.String())
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}

func TestDoubleInterruptKills(t *testing.T) {
	m := marker(t)
	cmd, errb := startBackground(t, m, "run", "-n", "4", "--verbose", "--kill-after", "30s", "sh", "-c", "trap '' INT TERM; sleep "+m+"; sleep "+m)
	cmd.Process.Signal(syscall.SIGINT)
	// Two signals sent at once may merge into one: wait until the first
	// was forwarded (the ranks ignore it).
	waitFor(t, "the first SIGINT to be forwarded", 10*time.Second, func() bool {
		return strings.Contains(errb.String(), "forwarding signal 2")
	})
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Errorf("after two SIGINTs: %v, want exit 130; stderr:\n%s", err, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("a second SIGINT did not end the job; stderr:\n%s", errb.String())
	}
	waitGone(t, "sleep "+m, 3*time.Second)
}
