package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mpiProgram compiles testdata/NAME.c with MPICH's compiler (mpicc.mpich:
// Open MPI's may be the default mpicc) into a temporary directory, or
// skips the test when it is absent (make deps installs it).
func mpiProgram(t *testing.T, name string) string {
	t.Helper()
	return compileMPI(t, "mpicc.mpich", "mpich and libmpich-dev", name)
}

// compileMPI compiles testdata/NAME.c with the MPI compiler cc into a
// temporary directory, or skips the test when cc is absent (pkgs: what
// make deps installs for it).
func compileMPI(t *testing.T, cc, pkgs, name string) string {
	t.Helper()
	path, err := exec.LookPath(cc)
	if err != nil {
		t.Skipf("%s not installed (make deps installs %s)", cc, pkgs)
	}
	out := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command(path, "-O1", "-o", out, filepath.Join("testdata", name+".c")).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, name, err, b)
	}
	return out
}

func TestMPICHHello(t *testing.T) {
	hello := mpiProgram(t, "mpi_hello")
	for _, tc := range []struct {
		n, nodes int
		wrap     bool // start the program with PMI_FD unset: PMI-1's TCP mode
		e2e      bool // only in make test-e2e
	}{{1, 0, false, true}, {2, 0, false, false}, {16, 0, false, true}, {16, 4, false, true}, {4, 2, true, false}} {
		t.Run(fmt.Sprintf("n%d_nodes%d_tcp%v", tc.n, tc.nodes, tc.wrap), func(t *testing.T) {
			if tc.e2e {
				e2eOnly(t, "TestMPICHHello/n2_nodes0_tcpfalse and n4_nodes2_tcptrue (one node, several nodes over PMI-1's TCP mode)")
			}
			args := []string{"run", "-l", "-n", fmt.Sprint(tc.n)}
			if tc.nodes > 0 {
				args = append(args, "--test-nodes", fmt.Sprint(tc.nodes))
			}
			if tc.wrap {
				args = append(args, "env", "-u", "PMI_FD")
			}
			r := ftlaunch(t, "", append(args, hello)...)
			want := fmt.Sprintf("[0] hello from %d ranks, allreduce sum %d (want %d), bcast 42\n", tc.n, tc.n*(tc.n-1)/2, tc.n*(tc.n-1)/2)
			if r.code != 0 || r.stdout != want {
				t.Fatalf("exit %d\nstdout %q\nwant   %q\nstderr:\n%s", r.code, r.stdout, want, r.stderr)
			}
		})
	}
}

// TestMPICHLarge runs 64 ranks, which takes minutes on two cores (MPICH's
// UCX start-up is per process): only with FTLAUNCH_MPI_LARGE=1 (make
// test-mpi-large).
func TestMPICHLarge(t *testing.T) {
	if os.Getenv("FTLAUNCH_MPI_LARGE") == "" {
		t.Skip("64-rank MPICH runs take minutes: set FTLAUNCH_MPI_LARGE=1 (make test-mpi-large)")
	}
	hello := mpiProgram(t, "mpi_hello")
	for _, nodes := range []string{"0", "4"} {
		r := ftlaunchLimit(t, 15*time.Minute, "", "run", "-l", "-n", "64", "--test-nodes", nodes, hello)
		want := "[0] hello from 64 ranks, allreduce sum 2016 (want 2016), bcast 42\n"
		if r.code != 0 || r.stdout != want {
			t.Fatalf("--test-nodes %s: exit %d\nstdout %q\nstderr:\n%s", nodes, r.code, r.stdout, r.stderr)
		}
	}
}

func TestMPICHAbort(t *testing.T) {
	hello := mpiProgram(t, "mpi_hello")
	r := ftlaunch(t, "", "run", "-n", "4", hello, "7")
	if r.code != 7 || !strings.Contains(r.stderr, "rank 1 on node") || !strings.Contains(r.stderr, "Abort(7)") {
		t.Fatalf("exit %d, want 7 naming rank 1; stderr:\n%s", r.code, r.stderr)
	}
	if r.elapsed > 10*time.Second {
		t.Errorf("MPI_Abort took %v to end the job", r.elapsed)
	}
	waitGone(t, hello, 3*time.Second)
}

func TestMPICHKilledRank(t *testing.T) {
	loop := mpiProgram(t, "mpi_loop")
	cmd := exec.Command(ftlaunchBin(t), "run", "-n", "4", "--test-nodes", "2", "--kill-after", "1s", loop)
	out := &syncBuffer{}
	errb := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, "the MPI ranks to loop", 30*time.Second, func() bool { return strings.Contains(out.String(), "looping") })
	var victims []string
	for _, p := range liveProcesses(t, loop) {
		if _, cmdline, _ := strings.Cut(p, " "); strings.HasPrefix(cmdline, loop) {
			victims = append(victims, p)
		}
	}
	if len(victims) != 4 {
		t.Fatalf("want 4 ranks, found %q", victims)
	}
	var pid int
	fmt.Sscan(victims[2], &pid)
	start := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	err := cmd.Wait()
	took := time.Since(start)
	if err == nil {
		t.Fatalf("job succeeded after a rank was killed; stderr:\n%s", errb.String())
	}
	if took > 4*time.Second {
		t.Errorf("job ended %v after the kill, want within --kill-after plus a second or two", took)
	}
	if !strings.Contains(errb.String(), "killed by signal 9") {
		t.Errorf("stderr does not name the kill:\n%s", errb.String())
	}
	waitGone(t, loop, 3*time.Second)
}

func TestMPICHExitWithoutFinalize(t *testing.T) {
	loop := mpiProgram(t, "mpi_loop")
	r := ftlaunch(t, "", "run", "-n", "3", "--kill-after", "1s", loop, "3", "skip-finalize")
	if r.code == 0 || !strings.Contains(r.stderr, "without calling MPI_Finalize") {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	waitGone(t, loop, 3*time.Second)
}

// Programs that never speak PMI are not affected by its socket.
func TestNonMPIProgramIgnoresPMI(t *testing.T) {
	r := ftlaunch(t, "", "run", "-l", "-n", "2", "sh", "-c", `echo "fd=$PMI_FD rank=$PMI_RANK size=$PMI_SIZE"`)
	if r.code != 0 || !strings.Contains(r.stdout, "[1] fd=4 rank=1 size=2") {
		t.Fatalf("exit %d, stdout:\n%s", r.code, r.stdout)
	}
}
