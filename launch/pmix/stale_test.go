package pmix

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepStale: the directories of a process that no longer exists go;
// this process's, names of another shape and plain files stay.
func TestSweepStale(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid // ended and reaped: no process has it now (barring reuse)
	if alive(dead) {
		t.Skipf("pid %d was reused already", dead)
	}
	parent := t.TempDir()
	mk := func(name string, dir bool) string {
		p := filepath.Join(parent, name)
		var err error
		if dir {
			err = os.MkdirAll(filepath.Join(p, "vader"), 0o700)
		} else {
			err = os.WriteFile(p, nil, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := mk(dirPrefix+strconv.Itoa(dead)+"-123", true)
	kept := []string{
		mk(ownPrefix()+"456", true),
		mk(dirPrefix+"789", true), // an older build's name: no pid in it
		mk(dirPrefix+strconv.Itoa(dead)+"-file", false),
		mk("other", true),
	}
	n, err := sweepStale(parent)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("%s: %v, want it removed", gone, err)
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
}

func TestStalePID(t *testing.T) {
	for name, want := range map[string]int{
		"ftlaunch-pmix-42-1234": 42,
		"ftlaunch-pmix-1234":    0,
		"ftlaunch-pmix-x-1":     0,
		"ftlaunch-pmix--1":      0,
		"ftlaunch-42-1":         0,
	} {
		got, ok := stalePID(name)
		if got != want || ok != (want > 0) {
			t.Errorf("stalePID(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
}
