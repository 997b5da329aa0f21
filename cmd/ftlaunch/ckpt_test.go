package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkCkptRun checks mpi_ckpt's result line: steps, and a checksum equal
// to the expected one.
func checkCkptRun(t *testing.T, r result, steps int) {
	t.Helper()
	var s int
	var got, want string
	if n, err := fmt.Sscanf(r.stdout, "steps %d checksum %s expected %s\n", &s, &got, &want); r.code != 0 || n != 3 || err != nil || s != steps || got != want {
		t.Fatalf("exit %d, stdout %q (want %d steps, checksum == expected)\nstderr:\n%s", r.code, r.stdout, steps, r.stderr)
	}
}

// TestMPICHCheckpointRestart runs testdata/mpi_ckpt under ftlaunch: from
// scratch, then again on its checkpoints, then with one rank a checkpoint
// behind the others (as when it was killed before writing its last).
func TestMPICHCheckpointRestart(t *testing.T) {
	e2eOnly(t, "TestRestartJobMPICH (the same program restarted from its checkpoints by --restart job)")
	prog := mpiProgram(t, "mpi_ckpt")
	dir := filepath.Join(t.TempDir(), "ckpt")

	r := ftlaunch(t, "", "run", "-n", "4", prog, dir, "50")
	checkCkptRun(t, r, 50)
	if strings.Contains(r.stderr, "restarted") {
		t.Errorf("a first run says it restarted:\n%s", r.stderr)
	}

	r = ftlaunch(t, "", "run", "-n", "4", "--test-nodes", "2", prog, dir, "57")
	checkCkptRun(t, r, 57)
	if !strings.Contains(r.stderr, "restarted from step 50") {
		t.Errorf("the second run did not resume from step 50:\n%s", r.stderr)
	}

	// Rank 2 is one checkpoint behind (at 50, the others at 55): the
	// others go back to the one they kept before their last.
	path := filepath.Join(dir, "rank-2")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var size, rank, step, prev int
	var v, pv string
	if n, err := fmt.Sscanf(string(b), "mpi_ckpt size %d rank %d step %d value %s prev %d value %s\n", &size, &rank, &step, &v, &prev, &pv); n != 6 || err != nil || step != 55 || prev != 50 {
		t.Fatalf("rank 2's checkpoint %q: %v", b, err)
	}
	behind := fmt.Sprintf("mpi_ckpt size %d rank %d step %d value %s prev 0 value 0\n", size, rank, prev, pv)
	if err := os.WriteFile(path, []byte(behind), 0o644); err != nil {
		t.Fatal(err)
	}
	r = ftlaunch(t, "", "run", "-n", "4", prog, dir, "60", "1")
	checkCkptRun(t, r, 60)
	if !strings.Contains(r.stderr, "restarted from step 50") {
		t.Errorf("the third run did not resume from step 50:\n%s", r.stderr)
	}
	for rank := range 4 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d", rank)))
		if err != nil || !strings.Contains(string(b), " step 60 ") || !strings.Contains(string(b), " prev 55 ") {
			t.Errorf("rank %d's checkpoint after the third run: %q, %v", rank, b, err)
		}
	}
}
