package journal

import (
	"errors"
	"os"
	"testing"
)

// TestLiveReport: a live report written is read back whole, replaced by
// the next, and gone once removed (removing it again is no error).
func TestLiveReport(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadLive(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no report yet: %v", err)
	}
	if err := WriteLive(dir, "fe", Live{Job: "ft-1", Root: "fe", Phase: "launching", N: 4}); err != nil {
		t.Fatal(err)
	}
	if err := WriteLive(dir, "node1", Live{Job: "ft-1", Root: "node1", Phase: "running", N: 4, Failover: true, Term: 3}); err != nil {
		t.Fatal(err)
	}
	l, err := ReadLive(dir)
	if err != nil || l.Root != "node1" || l.Phase != "running" || !l.Failover || l.Term != 3 || l.N != 4 {
		t.Fatalf("read back %+v, %v: want the successor's report", l, err)
	}
	for range 2 {
		if err := RemoveLive(dir); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadLive(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after its removal: %v", err)
	}
}
