package journal

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
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

// TestGroupLiveReport: a root's group writes the live report while its
// log is open, not once its end is being committed, and removes it; a
// group without one (nil) does nothing.
func TestGroupLiveReport(t *testing.T) {
	var none *Group
	none.WriteLive("fe", func() Live { t.Error("a nil group built a report"); return Live{} })
	if err := none.RemoveLive(); err != nil {
		t.Errorf("a nil group's removal: %v", err)
	}
	g, err := OpenGroup(context.Background(), Config{StateDir: t.TempDir(), Node: "fe", Solo: true, Job: Job{ID: "ft-live", N: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.End()
	g.Start()
	g.WriteLive("fe", func() Live { return Live{Job: "ft-live", Phase: "running"} })
	if l, err := ReadLive(g.Dir()); err != nil || l.Phase != "running" {
		t.Fatalf("written: %+v, %v", l, err)
	}
	g.BeginClose(0, "success", func(time.Duration, error) {})()
	g.WriteLive("fe", func() Live { t.Error("a report built once the end is being committed"); return Live{} })
	if err := g.RemoveLive(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLive(g.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after its removal: %v", err)
	}
}

// TestLivePhase: the live report's phase, the first that holds of ending,
// terminating, launching, else running; a recovery's phase is dated only
// once committed after its failure.
func TestLivePhase(t *testing.T) {
	for _, c := range []struct {
		ending, terminating, launching bool
		want                           string
	}{
		{false, false, false, "running"},
		{false, false, true, "launching"},
		{false, true, true, "terminating"},
		{true, true, true, "ending"},
		{true, false, false, "ending"},
	} {
		var l Live
		l.SetPhase(c.ending, c.terminating, c.launching)
		if l.Phase != c.want {
			t.Errorf("ending %v, terminating %v, launching %v: phase %q, want %q", c.ending, c.terminating, c.launching, l.Phase, c.want)
		}
	}
	failed := time.Unix(100, 0)
	var l Live
	l.RecoveryAt(failed, failed.Add(time.Second)) // no recovery: nothing to date
	l.Recovery = &LiveRecovery{}
	l.RecoveryAt(failed, failed.Add(-time.Second))
	if !l.Recovery.Failed.Equal(failed) || !l.Recovery.Phase.IsZero() {
		t.Errorf("a phase committed before the failure: %+v", l.Recovery)
	}
	l.RecoveryAt(failed, failed.Add(time.Second))
	if !l.Recovery.Phase.Equal(failed.Add(time.Second)) {
		t.Errorf("a phase committed after the failure: %+v", l.Recovery)
	}
}
