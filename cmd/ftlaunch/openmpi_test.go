package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/pmix"
)

// openMPIProgram compiles testdata/NAME.c with Open MPI's compiler
// (mpicc.openmpi: MPICH keeps the unsuffixed mpicc) into a temporary
// directory, or skips the test when Open MPI or OpenPMIx is absent (make
// deps installs them).
func openMPIProgram(t *testing.T, name string) string {
	t.Helper()
	if err := pmix.Available(); err != nil {
		t.Skipf("%v (make deps installs it)", err)
	}
	return compileMPI(t, "mpicc.openmpi", "openmpi-bin and libopenmpi-dev", name)
}

// TestOpenMPI runs unmodified Open MPI programs: a hello with an
// allreduce, a broadcast and messages between every pair of ranks, and a
// ring of point-to-point messages, on the default local launch (the
// agent in the front-end's process) and on test nodes (a PMIx server in
// each agent process, fences through the root).
func TestOpenMPI(t *testing.T) {
	hello := openMPIProgram(t, "mpi_hello")
	ring := openMPIProgram(t, "mpi_ring")
	for _, tc := range []struct{ n, nodes int }{{1, 0}, {4, 0}, {4, 2}} {
		t.Run(fmt.Sprintf("n%d_nodes%d", tc.n, tc.nodes), func(t *testing.T) {
			if tc.nodes == 0 {
				e2eOnly(t, "TestOpenMPI/n4_nodes2 (four ranks over two nodes: the same server and programs)")
			}
			args := []string{"run", "-l", "-n", fmt.Sprint(tc.n)}
			if tc.nodes > 0 {
				args = append(args, "--test-nodes", fmt.Sprint(tc.nodes))
			}
			sum := tc.n * (tc.n - 1) / 2
			r := ftlaunch(t, "", append(args, hello)...)
			want := fmt.Sprintf("[0] hello from %d ranks, allreduce sum %d (want %d), bcast 42\n", tc.n, sum, sum)
			if r.code != 0 || r.stdout != want {
				t.Fatalf("hello: exit %d\nstdout %q\nwant   %q\nstderr:\n%s", r.code, r.stdout, want, r.stderr)
			}
			r = ftlaunch(t, "", append(args, ring, "3")...)
			want = fmt.Sprintf("[0] ring of %d ranks, 3 rounds: token %d (want %d)\n", tc.n, 3*sum, 3*sum)
			if r.code != 0 || r.stdout != want {
				t.Fatalf("ring: exit %d\nstdout %q\nwant   %q\nstderr:\n%s", r.code, r.stdout, want, r.stderr)
			}
		})
	}
}

// TestOpenMPIAppnum runs an MPMD job of two Open MPI programs: each rank
// learns its block (MPI_APPNUM) and its place among its node's ranks from
// the PMIx server.
func TestOpenMPIAppnum(t *testing.T) {
	appnum := openMPIProgram(t, "mpi_appnum")
	r := ftlaunch(t, "", "run", "-l", "-n", "1", appnum, "A", ":", "-n", "2", appnum, "B")
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	got := map[int]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var label, prog string
		var rank, size, app, lrank, lsize int
		if _, err := fmt.Sscanf(line, "%s %s rank=%d size=%d appnum=%d local=%d/%d", &label, &prog, &rank, &size, &app, &lrank, &lsize); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[rank] = fmt.Sprintf("%s %s size=%d appnum=%d local=%d/%d", label, prog, size, app, lrank, lsize)
	}
	want := map[int]string{
		0: "[0] A size=3 appnum=0 local=0/3",
		1: "[1] B size=3 appnum=1 local=1/3",
		2: "[2] B size=3 appnum=1 local=2/3",
	}
	for rank, w := range want {
		if got[rank] != w {
			t.Errorf("rank %d: %q, want %q", rank, got[rank], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d ranks reported, want %d:\n%s", len(got), len(want), r.stdout)
	}
}

// TestNetPIPEOpenMPI runs Debian's NetPIPE build for Open MPI
// (netpipe-openmpi) on two ranks: its 1024-byte row alone in the default
// suite, and the command as written (the whole sweep up to -u
// 1024: 17 s on a quiet machine, minutes on two loaded cores) under make
// test-e2e.
func TestNetPIPEOpenMPI(t *testing.T) {
	if err := pmix.Available(); err != nil {
		t.Skipf("%v (make deps installs it)", err)
	}
	np, err := exec.LookPath("NPopenmpi")
	if err != nil {
		t.Skip("NPopenmpi not installed (make deps installs netpipe-openmpi)")
	}
	for _, c := range []struct {
		name  string
		args  []string
		sweep bool
	}{
		{"1024-byte row", []string{"-l", "1024", "-u", "1024", "-p", "0"}, false},
		{"sweep to 1024", []string{"-u", "1024"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.sweep {
				e2eOnly(t, "the 1024-byte row alone")
			}
			r := ftlaunch(t, "", append([]string{"run", "-n", "2", np}, c.args...)...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			rows := netpipeRows(r.stdout + r.stderr) // NetPIPE writes its rows to stderr
			if rows[1024] == 0 {
				t.Fatalf("no 1024-byte row in NetPIPE's output:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			}
			if c.sweep && (rows[1] == 0 || len(rows) < 20) {
				t.Errorf("the sweep has %d rows, want every size from 1 byte to 1024:\n%s", len(rows), r.stderr)
			}
		})
	}
}

// netpipeRows returns NetPIPE's rows in out: repetitions by message size.
func netpipeRows(out string) map[int]int {
	rows := map[int]int{}
	for _, line := range strings.Split(out, "\n") {
		var row, size, times int
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d: %d bytes %d times", &row, &size, &times); err == nil && times > 0 {
			rows[size] = times
		}
	}
	return rows
}

// TestWithoutLibpmix makes OpenPMIx unloadable (pmix.LibraryEnv names a
// missing file): jobs run as before and say nothing about PMIx, a script
// (which the agent would serve PMIx) included; --mpi pmix fails before
// anything starts, in one line naming the package, leaving no job state.
func TestWithoutLibpmix(t *testing.T) {
	t.Setenv(pmix.LibraryEnv, filepath.Join(t.TempDir(), "libpmix.so.2"))
	script := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"true"}, {script}} {
		r := ftlaunch(t, "", append([]string{"run", "-n", "2"}, args...)...)
		want := strings.Repeat("ok\n", 2)
		if args[0] == "true" {
			want = ""
		}
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("run -n 2 %s: exit %d, stdout %q (want %q), stderr:\n%s", args[0], r.code, r.stdout, want, r.stderr)
		}
	}
	if _, err := exec.LookPath("mpicc.mpich"); err == nil {
		hello := mpiProgram(t, "mpi_hello")
		r := ftlaunch(t, "", "run", "-n", "2", hello)
		want := "hello from 2 ranks, allreduce sum 1 (want 1), bcast 42\n"
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("MPICH hello: exit %d, stdout %q (want %q), stderr:\n%s", r.code, r.stdout, want, r.stderr)
		}
	}
	state := t.TempDir()
	r := ftlaunch(t, "", "run", "-n", "2", "--mpi", "pmix", "--state-dir", state, "true")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code == 0 || len(lines) != 1 || !strings.Contains(lines[0], "libpmix2") {
		t.Errorf("--mpi pmix without libpmix: exit %d, stderr %q; want a failure in one line naming libpmix2", r.code, r.stderr)
	}
	if ents, err := os.ReadDir(state); err != nil || len(ents) != 0 {
		t.Errorf("--mpi pmix without libpmix left %d entries in the state directory (%v)", len(ents), err)
	}
}

// TestRestartRankRefusesOpenMPI: under --restart rank an Open MPI program
// ends the job at its first PMIx connection, as an MPICH one does at its
// PMI-1 init, pointing to --restart job.
func TestRestartRankRefusesOpenMPI(t *testing.T) {
	prog := openMPIProgram(t, "mpi_hello")
	r := ftlaunch(t, "", "run", "--restart", "rank", "-n", "2", prog)
	if r.code != 2 || !strings.Contains(r.stderr, "run it with --restart job") {
		t.Fatalf("exit %d, want 2 pointing to --restart job; stderr:\n%s", r.code, r.stderr)
	}
}

// TestRestartJobOpenMPI: under --restart job the Open MPI build of the
// checkpoint program is started again, in a namespace of its own, after
// one rank is killed, resumes from its checkpoint and completes with the
// right checksum.
func TestRestartJobOpenMPI(t *testing.T) {
	prog := openMPIProgram(t, "mpi_ckpt")
	ck := t.TempDir()
	cmd := exec.Command(ftlaunchBin(t), "run", "--restart", "job", "--max-restarts", "1", "-n", "4", prog, ck, "300", "10")
	out, errb := startJob(t, cmd)
	var pid int
	waitFor(t, "a checkpoint of rank 2", 60*time.Second, func() bool {
		pid = rankProcess(prog, 2, 1)
		_, err := os.Stat(filepath.Join(ck, "rank-2"))
		return pid > 0 && err == nil
	})
	st, _ := os.Stat(filepath.Join(ck, "rank-2"))
	waitFor(t, "a later checkpoint", 30*time.Second, func() bool {
		st2, err := os.Stat(filepath.Join(ck, "rank-2"))
		return err == nil && st2.ModTime().After(st.ModTime())
	})
	syscall.Kill(pid, syscall.SIGKILL)
	err := cmd.Wait()
	if err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	f := strings.Fields(out.String())
	if len(f) < 6 || f[0] != "steps" || f[1] != "300" || f[3] != f[5] {
		t.Errorf("wrong result: %q", out.String())
	}
	if !strings.Contains(errb.String(), "recovered: every rank started again") ||
		!strings.Contains(errb.String(), "restarted from step") || strings.Contains(errb.String(), "restarted from step 0 ") {
		t.Errorf("the job did not restart from a checkpoint:\n%s", errb.String())
	}
}

// TestMPIChoiceRecorded: --mpi is said by --verbose and kept in the job's
// state log (ftlaunch inspect).
func TestMPIChoiceRecorded(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{{"", "pmi1+pmix"}, {"pmi1", "pmi1"}, {"none", "none"}} {
		state := t.TempDir()
		args := []string{"run", "--verbose", "--state-dir", state, "-n", "1"}
		if tc.flag != "" {
			args = append(args, "--mpi", tc.flag)
		}
		r := ftlaunch(t, "", append(args, "true")...)
		if r.code != 0 || !strings.Contains(r.stderr, "ranks are served "+tc.want+" (--mpi)") {
			t.Errorf("--mpi %q: exit %d, --verbose does not say %s:\n%s", tc.flag, r.code, tc.want, r.stderr)
		}
		r = ftlaunch(t, "", "inspect", "--state-dir", state, "--json")
		var got struct{ Job struct{ MPI string } }
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Job.MPI != tc.want {
			t.Errorf("--mpi %q: state log says %q (%v), want %q", tc.flag, got.Job.MPI, err, tc.want)
		}
	}
}

// TestOpenMPIAbort: MPI_Abort(7) in one Open MPI rank (a PMIx abort) ends
// the job with code 7, naming the rank, and leaves no rank behind.
func TestOpenMPIAbort(t *testing.T) {
	hello := openMPIProgram(t, "mpi_hello")
	r := ftlaunch(t, "", "run", "-n", "4", hello, "7")
	if r.code != 7 || !strings.Contains(r.stderr, "rank 1 on node") || !strings.Contains(r.stderr, "Abort(7)") {
		t.Fatalf("exit %d, want 7 naming rank 1; stderr:\n%s", r.code, r.stderr)
	}
	waitGone(t, hello, 10*time.Second)
}
