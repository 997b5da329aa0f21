package recovery

import (
	"reflect"
	"testing"
	"time"
)

// TestTerminateOverdueKillsWhatRuns: once a terminate is overdue, the
// agents whose ranks have not all ended (and whose link stands) are told
// again to kill them, the user once; none once every rank ended or the
// job is over.
func TestTerminateOverdueKillsWhatRuns(t *testing.T) {
	cfg := ledgerConfig(None) // ranks 0, 1 on n0; 2, 3 on n1
	cfg.Up, cfg.KillAfter = allUp(2), time.Second
	p := New(cfg)
	p.Step(TimedOut{Limit: time.Minute})
	p.Step(RankExited{Rank: 0, Node: "n0", Signal: 15})
	p.Step(RankExited{Rank: 1, Node: "n0", Signal: 15})
	p.Step(RankExited{Rank: 2, Node: "n1", Signal: 15})
	want := []Action{KillOverdue{Agents: []int{1}, Ranks: 1, First: true, KillAfter: time.Second}}
	if got := p.Step(TerminateOverdue{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("first: %+v, want %+v", got, want)
	}
	want[0] = KillOverdue{Agents: []int{1}, Ranks: 1, KillAfter: time.Second}
	if got := p.Step(TerminateOverdue{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("again: %+v, want %+v", got, want)
	}
	p.Step(RankExited{Rank: 3, Node: "n1", Signal: 9})
	if got := p.Step(TerminateOverdue{}); got != nil {
		t.Fatalf("every rank ended: %+v", got)
	}
	if w, warn := Narrate(KillOverdue{Agents: []int{1}, Ranks: 1, First: true, KillAfter: time.Second}, func(i int) string { return "n1" }, nil); !warn ||
		w != "1 rank(s) on node(s) n1 still running 6s after the job was terminated (--kill-after 1s): killing them" {
		t.Fatalf("words %q (warn %v)", w, warn)
	}
}
