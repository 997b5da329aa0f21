package recovery

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// answer plays the agents and the replicated log for the actions of one
// step: every Commit is committed, every agent acknowledges, every
// respawned rank publishes an address; it returns every action seen,
// those of the answers too.
func answer(p *Planner, agents int, acts []Action) []Action {
	var all []Action
	for len(acts) > 0 {
		act := acts[0]
		acts = acts[1:]
		all = append(all, act)
		var evs []Event
		switch a := act.(type) {
		case Commit:
			evs = append(evs, Committed{Epoch: a.Rec.Epoch, Stage: a.Rec.Stage})
		case Suspend:
			for i := range agents {
				evs = append(evs, Suspended{Agent: i, Epoch: a.Epoch})
			}
		case Respawn:
			evs = append(evs, Respawned{Rank: a.Rank, Incarnation: a.Incarnation, Addr: []byte("addr")})
		case Patch:
			for i := range agents {
				evs = append(evs, Patched{Agent: i, Epoch: a.Epoch, Version: a.Version})
			}
		case RestartJob:
			for i := range agents {
				evs = append(evs, Restarted{Agent: i, Epoch: a.Epoch})
			}
		}
		for _, ev := range evs {
			acts = append(acts, p.Step(ev)...)
		}
	}
	return all
}

// recoveredIn is what the actions name as started again: the Recovered
// of Commits and AloneOvers.
func recoveredIn(acts []Action) []RankInc {
	var out []RankInc
	for _, act := range acts {
		switch a := act.(type) {
		case Commit:
			out = append(out, a.Recovered...)
		case AloneOver:
			out = append(out, a.Recovered...)
		}
	}
	return out
}

func ledgerConfig(policy Policy) Config {
	return Config{Policy: policy, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 3,
		AckTimeout: time.Second, TableReady: true, Nodes: []string{"n0", "n1"}}
}

// TestLedger: which ranks count as ended after each event, and which the
// records name as started again: the root counts the job's end and the
// records' rows from the ledger alone.
func TestLedger(t *testing.T) {
	failed := func(r int) RankExited { return RankExited{Rank: r, Node: "n", Code: 3} }
	clean := func(r int) RankExited { return RankExited{Rank: r, Node: "n"} }
	for _, tc := range []struct {
		name      string
		cfg       Config
		events    []Event
		ended     []int     // ranks that count as ended after the events
		recovered []RankInc // named as started again by the records, in order
		inRecov   []int     // ranks a recovery under way starts again
		hold      bool      // nothing is answered: the recovery stays at its first stage
	}{
		{
			name:   "ends are counted under policy None",
			cfg:    ledgerConfig(None),
			events: []Event{clean(0), failed(2)},
			ended:  []int{0, 2},
		},
		{
			name:      "a failed rank is running again once replaced, and named as its next incarnation",
			cfg:       ledgerConfig(Rank),
			events:    []Event{clean(1), failed(2)},
			ended:     []int{1},
			recovered: []RankInc{{Rank: 2, Incarnation: 2}},
		},
		{
			name:    "a failed rank counts as running while its restart is under way",
			cfg:     ledgerConfig(Rank),
			events:  []Event{failed(2)},
			ended:   nil,
			inRecov: []int{2},
			hold:    true,
		},
		{
			name:      "a restart of the job makes every older end stale; only failed ones are owed",
			cfg:       ledgerConfig(Job),
			events:    []Event{clean(0), failed(3)},
			ended:     nil,
			recovered: []RankInc{{Rank: 3, Incarnation: 2}},
		},
		{
			name:   "a terminated job counts the ranks its restart had not started as ended again",
			cfg:    ledgerConfig(Rank),
			events: []Event{failed(2), TimedOut{Limit: time.Second}},
			ended:  []int{2},
			hold:   true,
		},
		{
			name:   "a rank that starts after the terminate runs until its end comes",
			cfg:    ledgerConfig(Rank),
			events: []Event{clean(1), TimedOut{Limit: time.Second}, RankStarted{Rank: 1, Incarnation: 2, Fresh: true}},
			ended:  nil,
		},
		{
			name:   "a start heard again after the terminate changes nothing",
			cfg:    ledgerConfig(Rank),
			events: []Event{clean(1), TimedOut{Limit: time.Second}, RankStarted{Rank: 1, Incarnation: 2}},
			ended:  []int{1},
		},
		{
			name:   "the ranks of an agent gone are ended once, whatever is said again",
			cfg:    ledgerConfig(None),
			events: []Event{LinkLost{Agent: 1, Err: "link ended"}, LinkLost{Agent: 1, Err: "link ended"}},
			ended:  []int{2, 3},
		},
		{
			name: "the ranks of an agent started again run again, and are named",
			cfg:  ledgerConfig(Rank),
			events: []Event{LinkLost{Agent: 1, Err: "link ended"}, Relaunched{Agent: 1, Incarnation: 2},
				FenceDone{Agent: 1, Node: "n1", Incarnation: 1}},
			ended:     nil,
			recovered: []RankInc{{Rank: 2, Incarnation: 2}, {Rank: 3, Incarnation: 2}},
		},
		{
			name:   "the ranks of an agent whose loss ends the job stay ended",
			cfg:    ledgerConfig(None),
			events: []Event{LinkLost{Agent: 1, Err: "link ended"}},
			ended:  []int{2, 3},
		},
		{
			name:   "a rank that ended before its agent was lost is not abandoned again",
			cfg:    ledgerConfig(None),
			events: []Event{clean(3), LinkLost{Agent: 1, Err: "link ended"}},
			ended:  []int{2, 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.cfg)
			var acts []Action
			for _, ev := range tc.events {
				if tc.hold {
					acts = append(acts, p.Step(ev)...)
					continue
				}
				acts = append(acts, answer(p, tc.cfg.Agents, p.Step(ev))...)
			}
			ended := ranksWhere(tc.cfg.Ranks, p.Ledger().Ended)
			if !slices.Equal(ended, tc.ended) || p.Ledger().EndedCount() != len(tc.ended) {
				t.Errorf("ended %v (count %d), want %v", ended, p.Ledger().EndedCount(), tc.ended)
			}
			if got := recoveredIn(acts); !slices.Equal(got, tc.recovered) {
				t.Errorf("recovered %v, want %v\nactions: %#v", got, tc.recovered, acts)
			}
			if in := ranksWhere(tc.cfg.Ranks, p.Ledger().InRecovery); !slices.Equal(in, tc.inRecov) {
				t.Errorf("in recovery %v, want %v", in, tc.inRecov)
			}
		})
	}
}

// TestLedgerRestored: a new leader's planner counts the ends the
// replicated table has, except those of the ranks the recovery it carries
// on starts again, which it names once that recovery ends.
func TestLedgerRestored(t *testing.T) {
	cfg := ledgerConfig(Rank)
	cfg.Resumed, cfg.Ended, cfg.EndedFailed = true, []int{0, 2}, []int{2}
	p := New(cfg)
	p.Restore(Checkpoint{Epoch: 3, Stage: StageSuspend, Version: 1,
		Ranks: []RankRecord{{Rank: 2, Agent: 1, Incarnation: 1, Restarts: 1, Failed: true}}})
	if !p.Ledger().Ended(0) || p.Ledger().Ended(2) || p.Ledger().EndedCount() != 1 {
		t.Fatalf("restored: rank 0 ended %v, rank 2 ended %v, count %d; want true, false, 1",
			p.Ledger().Ended(0), p.Ledger().Ended(2), p.Ledger().EndedCount())
	}
	acts := answer(p, cfg.Agents, p.Step(LeaderChanged{}))
	if got, want := recoveredIn(acts), []RankInc{{Rank: 2, Incarnation: 2}}; !slices.Equal(got, want) {
		t.Errorf("recovered %v, want %v", got, want)
	}
}

// TestLedgerNamesEachRestartOnce: the records name each rank started again
// once, as the incarnation that starts, in the record of the recovery that
// starts it: an end told twice, an end of an incarnation a restart of the
// job already replaced, or a failure during a restart of the job owe
// nothing more, and the failure that causes a restart is named by that
// restart's record (not by the next one's).
func TestLedgerNamesEachRestartOnce(t *testing.T) {
	failed := func(r int, inc uint64) RankExited { return RankExited{Rank: r, Incarnation: inc, Node: "n", Code: 3} }
	// step is one event, answered (every commit committed, every agent
	// acknowledging), with what earlier steps held, or held.
	type step struct {
		ev     Event
		answer bool
	}
	for _, tc := range []struct {
		name      string
		policy    Policy
		steps     []step
		recovered []RankInc
		ended     []int
	}{
		{
			name:   "a failure told twice before its restart is sent is named once",
			policy: Job,
			steps: []step{{failed(3, 1), false}, {failed(3, 1), true},
				{failed(1, 2), true}},
			recovered: []RankInc{{3, 2}, {1, 3}},
		},
		{
			name:   "an end of an incarnation the restart replaces owes nothing",
			policy: Job,
			steps: []step{{failed(3, 1), false}, {failed(0, 1), true},
				{failed(1, 2), true}},
			recovered: []RankInc{{3, 2}, {1, 3}},
		},
		{
			name:   "a failure during a restart of the job is named by the restart it causes",
			policy: Job,
			steps: []step{{failed(3, 1), false}, {Committed{Epoch: 1, Stage: StageRestartJob}, false},
				{failed(3, 2), true}, {Restarted{Agent: 0, Epoch: 1}, true}, {failed(0, 3), true}},
			recovered: []RankInc{{3, 2}, {3, 3}, {0, 4}},
		},
		{
			name:      "an end told again after its restart was named neither ends the rank nor owes it",
			policy:    Rank,
			steps:     []step{{failed(2, 1), true}, {failed(2, 1), true}, {failed(0, 1), true}},
			recovered: []RankInc{{2, 2}, {0, 2}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ledgerConfig(tc.policy)
			p := New(cfg)
			var acts, held []Action
			for _, s := range tc.steps {
				held = append(held, p.Step(s.ev)...)
				if s.answer {
					acts = append(acts, answer(p, cfg.Agents, held)...)
					held = nil
				}
			}
			acts = append(acts, held...)
			if got := recoveredIn(acts); !slices.Equal(got, tc.recovered) {
				t.Errorf("recovered %v, want %v", got, tc.recovered)
			}
			if ended := ranksWhere(cfg.Ranks, p.Ledger().Ended); !slices.Equal(ended, tc.ended) {
				t.Errorf("ended %v, want %v", ended, tc.ended)
			}
		})
	}
}

// TestLedgerRanksStarted: which ranks an agent's report of its running
// ranks starts for the first time, which again (a new incarnation, or the
// same one in a new process: a successor hearing of a restart), and which
// it only repeats; where a rank nobody placed runs is learned; a rank
// started again alone ends its recovery.
func TestLedgerRanksStarted(t *testing.T) {
	cfg := ledgerConfig(Rank)
	cfg.RankAgent = []int{0, 0, 1, -1} // rank 3: not known yet (a successor's)
	p := New(cfg)
	steps := []struct {
		ev   RanksStarted
		want []Action
	}{
		{RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}},
			[]Action{RanksRunning{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}}}},
		{RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}}, nil}, // heard again
		{RanksStarted{Agent: 1, Ranks: []int{2, 3}, Pids: []int{20, 21}},
			[]Action{RanksRunning{Agent: 1, Ranks: []int{2, 3}, Pids: []int{20, 21}}}},
		{RanksStarted{Agent: 0, Ranks: []int{1}, Pids: []int{12}, Incs: []uint64{2}},
			[]Action{RanksRunning{Agent: 0, Ranks: []int{1}, Pids: []int{12}, Incs: []uint64{2}, Again: true}}},
		{RanksStarted{Agent: 0, Ranks: []int{1}, Pids: []int{12}, Incs: []uint64{2}}, nil}, // the same start, again
		{RanksStarted{Agent: 0, Ranks: []int{1}, Pids: []int{13}, Incs: []uint64{2}}, // another process, as a successor hears of it
			[]Action{RanksRunning{Agent: 0, Ranks: []int{1}, Pids: []int{13}, Incs: []uint64{2}, Again: true}}},
	}
	for i, s := range steps {
		if got := p.Step(s.ev); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: %+v, want %+v", i, got, s.want)
		}
	}
	l := p.Ledger()
	if l.StartedCount() != 4 || l.Runs(1) != 2 || l.Pid(1) != 13 || l.Runs(0) != 1 || l.Agent(3) != 1 {
		t.Fatalf("started %d, rank 1 runs %d (pid %d), rank 0 runs %d, rank 3 on agent %d", l.StartedCount(), l.Runs(1), l.Pid(1), l.Runs(0), l.Agent(3))
	}
}

// TestLedgerRunning: the processes of the ranks that have not ended, on
// the agents asked for; a rank whose agent or process is not known yet is
// not among them.
func TestLedgerRunning(t *testing.T) {
	cfg := ledgerConfig(None)
	cfg.RankAgent = []int{0, 0, 1, -1}
	p := New(cfg)
	p.Step(RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}})
	p.Step(RanksStarted{Agent: 1, Ranks: []int{2}, Pids: []int{20}})
	on := func(agent int) func(int) bool { return func(n int) bool { return n == agent } }
	all := func(int) bool { return true }
	for _, tc := range []struct {
		name string
		on   func(int) bool
		want []int
	}{
		{"agent 0", on(0), []int{10, 11}},
		{"agent 1", on(1), []int{20}},
		{"every agent", all, []int{10, 11, 20}},
	} {
		if got := p.Ledger().Running(tc.on); !slices.Equal(got, tc.want) {
			t.Errorf("%s: running %v, want %v", tc.name, got, tc.want)
		}
	}
	p.Step(RankExited{Rank: 0, Node: "n0"})
	if got := p.Ledger().Running(all); !slices.Equal(got, []int{11, 20}) {
		t.Errorf("after rank 0 ended: running %v, want [11 20]", got)
	}
}

// TestLedgerPids: the processes of the ranks asked for, ended or not (a
// lost agent's abandoned ranks are killed all the same); 0 for a rank
// whose process is not known.
func TestLedgerPids(t *testing.T) {
	cfg := ledgerConfig(None)
	cfg.RankAgent = []int{0, 0, 1, -1}
	p := New(cfg)
	p.Step(RanksStarted{Agent: 0, Ranks: []int{0, 1}, Pids: []int{10, 11}})
	p.Step(RankExited{Rank: 0, Node: "n0"})
	if got := p.Ledger().Pids([]int{0, 1, 3}); !slices.Equal(got, []int{10, 11, 0}) {
		t.Errorf("pids %v, want [10 11 0]", got)
	}
}

// ranksWhere lists the ranks below n for which f holds, in order.
func ranksWhere(n int, f func(r int) bool) []int {
	var out []int
	for r := range n {
		if f(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestLedgerFailed: which ranks the job's summary names as failed, each
// by its last end: one that failed on its own, even while the job ends,
// and the ranks lost with their agent while the job ran; not the ones the
// job's end killed, a rank never started, ranks abandoned with an agent
// while the job ended or never started, nor a clean end.
func TestLedgerFailed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		events []Event
		want   []RankExited
	}{
		{name: "a failure and the ranks its end killed", policy: None,
			events: []Event{RankExited{Rank: 0, Code: 3}, RankExited{Rank: 1, Signal: 15}, RankExited{Rank: 2}},
			want:   []RankExited{{Rank: 0, Node: "n0", Code: 3}}},
		{name: "a failure of its own while the job ends", policy: None,
			events: []Event{TimedOut{Limit: time.Second}, RankExited{Rank: 1, Code: 3}, RankExited{Rank: 0, Signal: 9}},
			want:   []RankExited{{Rank: 1, Node: "n0", Code: 3}}},
		{name: "never started", policy: None,
			events: []Event{RankExited{Rank: 0, Code: 127, Reason: "no such file"}, RankExited{Rank: 1, Code: 1, Skipped: true}},
			want:   []RankExited{{Rank: 0, Node: "n0", Code: 127, Reason: "no such file"}}},
		{name: "the ranks of an agent lost while the job ran", policy: None,
			events: []Event{LinkLost{Agent: 1, Err: "link ended"}},
			want: []RankExited{{Rank: 2, Node: "n1", Code: ExitLauncher, Reason: "lost with its agent"},
				{Rank: 3, Node: "n1", Code: ExitLauncher, Reason: "lost with its agent"}}},
		{name: "the ranks of an agent lost while the job ended", policy: None,
			events: []Event{Signaled{Signal: 15}, LinkLost{Agent: 1, Err: "link ended"}}},
		{name: "the ranks of an agent never started", policy: None,
			events: []Event{LaunchFailed{Agent: 1, Node: "n1", Msg: "ssh: refused"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(ledgerConfig(tc.policy))
			for _, ev := range tc.events {
				p.Step(ev)
			}
			node := func(r int) string { return fmt.Sprintf("n%d", r/2) }
			if got := p.Ledger().Failed(node); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
