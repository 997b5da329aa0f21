package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/chaos/trial"
)

// Each kind's result check: the right line passes, a wrong or missing one
// fails; the shell kind's done lines once per rank under none and rank,
// at least once (once per incarnation) under job.
func TestAppResult(t *testing.T) {
	o := func(kind AppKind, p trial.Policy) *Options {
		return &Options{AppKind: kind, Policy: p, Steps: 20, Interval: 100 * time.Millisecond}
	}
	shell := []string{"[0] done 0 1", "[1] done 1 1", "[2] done 2 2"}
	for _, tc := range []struct {
		name    string
		o       *Options
		lines   []string
		ok      bool
		checked bool
	}{
		{"mpi right", o(KindMPI, trial.RestartJob), []string{"[1] x", "[0] steps 200 checksum 12ab expected 12ab"}, true, true},
		{"mpi wrong sum", o(KindMPI, trial.RestartJob), []string{"[0] steps 200 checksum 12ab expected 12ac"}, false, true},
		{"mpi short", o(KindMPI, trial.RestartJob), []string{"[0] steps 150 checksum 12ab expected 12ab"}, false, true},
		{"mpi from rank 1", o(KindMPI, trial.NoRestart), []string{"[1] steps 200 checksum 12ab expected 12ab"}, false, true},
		{"shell every rank", o(KindShell, trial.RestartRank), shell, true, true},
		{"shell missing rank", o(KindShell, trial.NoRestart), shell[:2], false, true},
		{"shell twice under rank", o(KindShell, trial.RestartRank), append(slices.Clone(shell), "[1] done 1 2"), false, true},
		{"shell twice under job", o(KindShell, trial.RestartJob), append(slices.Clone(shell), "[1] done 1 2"), true, true},
		{"shell another rank's line", o(KindShell, trial.NoRestart), []string{"[0] done 0 1", "[1] done 2 1", "[2] done 2 1"}, false, true},
		{"ring", o(KindRing, trial.NoRestart), []string{"[0] checksum 7 expected 7"}, true, true},
		{"ring wrong", o(KindDefault, trial.RestartRank), []string{"[0] checksum 7 expected 8"}, false, true},
		{"default app", o(KindDefault, trial.NoRestart), []string{"[0] " + AppDone + ": 3 ranks, 20 steps"}, true, true},
		{"--app", &Options{App: "/bin/true"}, nil, false, false},
	} {
		ok, checked, unique := appResult(tc.o, 3, tc.lines)
		if ok != tc.ok || checked != tc.checked || unique != tc.checked {
			t.Errorf("%s: ok %v checked %v unique %v, want %v %v", tc.name, ok, checked, unique, tc.ok, tc.checked)
		}
	}
}

// The command each kind runs.
func TestAppCommand(t *testing.T) {
	o := &Options{Steps: 20, Interval: 100 * time.Millisecond, Policy: trial.RestartJob, AppKind: KindMPI, MPIBin: "/run/app/mpi_ckpt"}
	if got := appCommand(o, "/bin/ftlaunch", "/w"); !slices.Equal(got, []string{"/run/app/mpi_ckpt", "/w/ckpt", "200", "10"}) {
		t.Errorf("mpi: %q", got)
	}
	o.AppKind = KindShell
	if got := appCommand(o, "/bin/ftlaunch", "/w"); got[0] != "sh" || !strings.Contains(got[2], "seq 1 20") || !strings.Contains(got[2], "sleep 0.100") {
		t.Errorf("shell: %q", got)
	}
	o.AppKind, o.Policy = KindRing, trial.NoRestart
	if got := appCommand(o, "/bin/ftlaunch", "/w"); got[1] != "ringapp" {
		t.Errorf("ring under none: %q", got)
	}
	o.AppKind = KindDefault
	if got := appCommand(o, "/bin/ftlaunch", "/w"); got[1] != "chaos" {
		t.Errorf("default under none: %q", got)
	}
}

// The shell kind's loop prints its rank's done line with the incarnation,
// in the form appResult reads.
func TestShellKindRuns(t *testing.T) {
	o := &Options{Steps: 2, Interval: 10 * time.Millisecond, AppKind: KindShell}
	cmd := appCommand(o, "", "")
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Env = append(os.Environ(), "FTLAUNCH_RANK=1", "FTLAUNCH_INCARNATION=2")
	out, err := c.Output()
	if err != nil || string(out) != "done 1 2\n" {
		t.Fatalf("%q: %q, %v", cmd, out, err)
	}
	if ok, _, _ := appResult(o, 2, []string{"[0] done 0 1", "[1] " + strings.TrimSpace(string(out))}); !ok {
		t.Error("its own line does not pass the check")
	}
}

// The MPI kind builds the checkpoint program with mpicc.mpich.
func TestBuildMPI(t *testing.T) {
	if _, err := exec.LookPath(mpiCompiler); err != nil {
		t.Skipf("%s not installed (make deps)", mpiCompiler)
	}
	src, err := os.ReadFile(filepath.Join("..", "..", "cmd", "ftlaunch", "testdata", MPIProgram+".c"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := buildMPI(t.TempDir(), src)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s: %v %v", bin, fi, err)
	}
	if _, err := buildMPI(t.TempDir(), nil); err == nil {
		t.Error("no source: built")
	}
}
