package main

import (
	"bytes"
	"testing"

	"github.com/ftlaunch/ftlaunch/chaos/harness"
	"github.com/ftlaunch/ftlaunch/chaos/trial"
)

// --app-kind picks one of chaos's applications; --app keeps its meaning
// and excludes it; MPI under --restart rank is refused (MPI cannot
// replace one rank); the MPI kind carries the checkpoint program's source.
func TestParseChaosAppKind(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		kind    harness.AppKind
		program trial.Program
		ok      bool
	}{
		{nil, harness.KindDefault, trial.Library, true},
		{[]string{"--app-kind", "ring"}, harness.KindRing, trial.Library, true},
		{[]string{"--app-kind", "shell", "--restart", "rank"}, harness.KindShell, trial.Plain, true},
		{[]string{"--app-kind", "mpi", "--restart", "job", "--spare-nodes", "1"}, harness.KindMPI, trial.MPI, true},
		{[]string{"--app-kind", "mpi"}, harness.KindMPI, trial.MPI, true},
		{[]string{"--app-kind", "mpi", "--restart", "rank"}, "", "", false},
		{[]string{"--app-kind", "fortran"}, "", "", false},
		{[]string{"--app-kind", "shell", "--app", "/bin/true"}, "", "", false},
	} {
		o, err := parseChaosFlags(append([]string{"--cluster", "test-nodes"}, tc.args...))
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.args, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		if o.AppKind != tc.kind || o.AppKind.Program() != tc.program {
			t.Errorf("%q: kind %q program %q, want %q %q", tc.args, o.AppKind, o.AppKind.Program(), tc.kind, tc.program)
		}
		if hasSrc := bytes.Contains(o.MPISource, []byte("MPI_Init")); hasSrc != (tc.kind == harness.KindMPI) {
			t.Errorf("%q: MPI source carried %v", tc.args, hasSrc)
		}
	}
	// The promise follows the kind: trial.Validate refuses what the
	// flags let through only by the config chaosCommand builds.
	o, err := parseChaosFlags([]string{"--cluster", "test-nodes", "--app", "/bin/true", "--", "-x"})
	if err != nil || o.AppKind != harness.KindDefault || o.App == "" || len(o.AppArgs) != 1 {
		t.Errorf("--app keeps its meaning: %+v, %v", o, err)
	}
}
