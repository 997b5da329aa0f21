package recovery

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// TestLedgerLive: the planner's share of the live report: the ranks
// running and ended, the recovery under way with the ranks it starts
// again (none named when every rank starts again), and the failure that
// ends the job.
func TestLedgerLive(t *testing.T) {
	failed := func(r int) RankExited { return RankExited{Rank: r, Node: "n", Code: 3} }
	for _, tc := range []struct {
		name   string
		policy Policy
		events []Event
		want   journal.Live
	}{
		{name: "every rank running", policy: Rank, events: []Event{RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}}, RanksStarted{Agent: 1, Ranks: []int{2, 3}, Pids: []int{20, 21}}},
			want: journal.Live{Running: 4}},
		{name: "a rank's restart under way", policy: Rank, events: []Event{RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}}, failed(1)},
			want: journal.Live{Running: 2, Recovery: &journal.LiveRecovery{Stage: "suspend", Epoch: 1, Ranks: []int{1}}}},
		{name: "a restart of the job names no rank", policy: Job, events: []Event{failed(1)},
			want: journal.Live{Recovery: &journal.LiveRecovery{Stage: "restart-job", Epoch: 1}}},
		{name: "a failure ends the job", policy: None, events: []Event{RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}}, failed(1)},
			want: journal.Live{Running: 1, Ended: 1, Failure: "rank 1 on node n exited with code 3"}},
	} {
		p := New(ledgerConfig(tc.policy))
		for _, ev := range tc.events {
			p.Step(ev)
		}
		var got journal.Live
		p.Ledger().Live(&got)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v (recovery %+v), want %+v (recovery %+v)", tc.name, got, got.Recovery, tc.want, tc.want.Recovery)
		}
	}
}

// TestStatusFinal: the final status is the failure that ended the job, its
// code and words, else success with the root's code.
func TestStatusFinal(t *testing.T) {
	p := New(ledgerConfig(None))
	if code, msg := p.Status().Final(0); code != 0 || msg != "success" {
		t.Errorf("no failure: %d %q", code, msg)
	}
	p.Step(RankExited{Rank: 1, Node: "n", Code: 3})
	if code, msg := p.Status().Final(0); code != 3 || msg != "rank 1 on node n exited with code 3" {
		t.Errorf("a rank's failure: %d %q", code, msg)
	}
}
