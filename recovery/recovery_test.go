package recovery

import (
	"reflect"
	"syscall"
	"testing"
	"time"
)

// end is what policy None does with a job's first failure while it runs.
func end(why Reason) []Action { return []Action{Record{Why: why}, Report{Why: why}, Terminate{}} }

// told is a failure recorded and told while the job is already ending.
func told(why Reason) []Action { return []Action{Record{Why: why}, Report{Why: why}} }

// rankEnded is rank's end on node, described so (RankExited.Describe).
func rankEnded(rank int, node string, code, sig int, how string) Reason {
	return Reason{Kind: ReasonRankEnded, Rank: rank, Node: node, Code: code, Signal: sig, Text: how}
}

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resumed bool
		before  []Event // taken first; their actions are not checked
		ev      Event
		want    []Action
		code    int   // the failure's exit code afterwards (0: none)
		phase   Phase // afterwards
	}{
		{name: "rank exits cleanly", ev: RankExited{Rank: 1, Node: "n0"}, phase: Running},
		{name: "rank exits with a code", ev: RankExited{Rank: 1, Node: "n0", Code: 3},
			want: end(rankEnded(1, "n0", 3, 0, "exited with code 3")), code: 3, phase: Ending},
		{name: "rank exit code 256 is a failure", ev: RankExited{Rank: 0, Node: "n0", Code: 256},
			want: end(rankEnded(0, "n0", 256, 0, "exited with code 256")), code: 1, phase: Ending},
		{name: "rank killed by a signal", ev: RankExited{Rank: 2, Node: "n1", Signal: int(syscall.SIGKILL)},
			want: end(rankEnded(2, "n1", 0, int(syscall.SIGKILL), "was killed by signal 9 (killed)")), code: 137, phase: Ending},
		{name: "rank could not start", ev: RankExited{Rank: 0, Node: "n0", Code: 127, Reason: "no such file"},
			want: end(rankEnded(0, "n0", 127, 0, "failed to start: no such file")), code: 127, phase: Ending},
		{name: "rank lost with its agent", ev: RankExited{Rank: 0, Node: "n0", Code: 1, Reason: "lost with its agent"},
			want: end(rankEnded(0, "n0", 1, 0, "lost with its agent")), code: 1, phase: Ending},
		{name: "rank fails while the job ends", before: []Event{TimedOut{Limit: time.Second}},
			ev: RankExited{Rank: 1, Node: "n0", Code: 3}, code: ExitTimeout, phase: Ending},
		{name: "rank fails after the user's signal", before: []Event{Signaled{Signal: 2}},
			ev: RankExited{Rank: 1, Node: "n0", Signal: int(syscall.SIGKILL)}, code: 130, phase: Ending},
		{name: "second failure changes nothing", before: []Event{RankExited{Rank: 0, Node: "n0", Code: 2}},
			ev: RankExited{Rank: 1, Node: "n0", Code: 3}, code: 2, phase: Ending},
		{name: "exit reported twice", before: []Event{RankExited{Rank: 1, Node: "n0"}},
			ev:   RankExited{Rank: 1, Node: "n0"},
			want: end(Reason{Kind: ReasonEndedTwice, Rank: 1, Node: "n0"}), code: ExitLauncher, phase: Ending},
		{name: "exit reported again after a failover", resumed: true, before: []Event{RankExited{Rank: 1, Node: "n0"}},
			ev: RankExited{Rank: 1, Node: "n0", Code: 9}, phase: Running},
		{name: "exit of a rank that does not exist", ev: RankExited{Rank: 7, Node: "n0"},
			want: end(Reason{Kind: ReasonNoSuchRank, Rank: 7, Node: "n0"}), code: ExitLauncher, phase: Ending},
		{name: "abort", ev: RankAborted{Rank: 1, Node: "n0", Code: 5, Msg: "bad input"},
			want: end(Reason{Kind: ReasonRankAbort, Rank: 1, Node: "n0", Code: 5, Text: "bad input"}), code: 5, phase: Ending},
		{name: "abort with code 0 fails the job", ev: RankAborted{Rank: 1, Node: "n0"},
			want: end(Reason{Kind: ReasonRankAbort, Rank: 1, Node: "n0"}), code: 1, phase: Ending},
		{name: "abort code taken modulo 256", ev: RankAborted{Rank: 1, Node: "n0", Code: 258},
			want: end(Reason{Kind: ReasonRankAbort, Rank: 1, Node: "n0", Code: 258}), code: 2, phase: Ending},
		{name: "rank protocol failure", ev: RankAborted{Rank: 3, Node: "n1", Code: 1, Msg: "broke the PMI protocol", Failed: true},
			want: end(Reason{Kind: ReasonRankBroke, Rank: 3, Node: "n1", Text: "broke the PMI protocol"}), code: 1, phase: Ending},
		{name: "agent lost", ev: AgentLost{Node: "n1", Err: "EOF"},
			want: end(Reason{Kind: ReasonAgentLost, Rank: NoRank, Node: "n1", Text: "EOF", Max: 0}), code: ExitLauncher, phase: Ending},
		{name: "agent lost while the job ends", before: []Event{Signaled{Signal: 15}}, ev: AgentLost{Node: "n1", Err: "EOF"},
			code: 143, phase: Ending},
		{name: "agent leaves after the job's end", before: []Event{Finished{}}, ev: AgentLost{Node: "n1", Err: "EOF"}, phase: Over},
		{name: "agent could not start", ev: LaunchFailed{Agent: 2, Node: "n2", Msg: "ssh n2: connection refused"},
			want: end(Reason{Kind: ReasonLaunch, Rank: NoRank, Node: "n2", Text: "ssh n2: connection refused"}), code: ExitLauncher, phase: Ending},
		{name: "agent could not start while the job ends", before: []Event{Signaled{Signal: 2}},
			ev: LaunchFailed{Agent: 2, Node: "n2", Msg: "ssh n2: connection refused"}, code: 130, phase: Ending},
		{name: "agent could not start after the end", before: []Event{Finished{}},
			ev: LaunchFailed{Agent: 2, Node: "n2", Msg: "x"}, phase: Over},
		{name: "share of the job not sent", ev: LaunchError{Node: "n2", Msg: "send the job to node n2: EOF"},
			want: end(Reason{Kind: ReasonLaunch, Rank: NoRank, Node: "n2", Text: "send the job to node n2: EOF"}), code: ExitLauncher, phase: Ending},
		{name: "protocol error", ev: ProtocolError{Node: "n1", Err: "unknown message type 99"},
			want: end(Reason{Kind: ReasonProtocol, Rank: NoRank, Node: "n1", Text: "unknown message type 99"}), code: ExitLauncher, phase: Ending},
		{name: "protocol error after the end is still told", before: []Event{Finished{}},
			ev: ProtocolError{Node: "n1", Err: "x"}, want: told(Reason{Kind: ReasonProtocol, Rank: NoRank, Node: "n1", Text: "x"}), code: ExitLauncher, phase: Over},
		{name: "collective mismatch", ev: CollectiveMismatch{Seq: 4, Node: "n1", Op: "barrier", Want: "allgather"},
			want: end(Reason{Kind: ReasonMismatch, Rank: NoRank, Node: "n1", Seq: 4, Op: "barrier", Want: "allgather"}), code: ExitLauncher, phase: Ending},
		{name: "stranded collective", ev: Stranded{Seq: 2, Node: "n3", Op: "barrier"},
			want: end(Reason{Kind: ReasonStranded, Rank: NoRank, Node: "n3", Seq: 2, Op: "barrier"}), code: ExitLauncher, phase: Ending},
		{name: "stranded while the job ends", before: []Event{Signaled{Signal: 2}}, ev: Stranded{Seq: 2, Node: "n3", Op: "barrier"}, code: 130, phase: Ending},
		{name: "timeout", ev: TimedOut{Limit: 90 * time.Second},
			want: end(Reason{Kind: ReasonTimeout, Rank: NoRank, Limit: 90 * time.Second}), code: ExitTimeout, phase: Ending},
		{name: "timeout after a failure is neither recorded nor sent", before: []Event{RankExited{Rank: 0, Node: "n0", Code: 2}}, ev: TimedOut{Limit: time.Second},
			code: 2, phase: Ending},
		{name: "the user's signal", ev: Signaled{Signal: 2}, want: append([]Action{SignalRanks{Signal: 2, Ends: true}}, end(Reason{Kind: ReasonSignal, Rank: NoRank, Signal: 2})...), code: 130, phase: Ending},
		{name: "the user's signal after the end", before: []Event{Finished{}}, ev: Signaled{Signal: 15}, phase: Over},
		{name: "finished", ev: Finished{}, phase: Over},
		{name: "finished after a failure", before: []Event{AgentLost{Node: "n1", Err: "EOF"}}, ev: Finished{}, code: ExitLauncher, phase: Over},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Policy: None, Ranks: 4, Resumed: tc.resumed})
			for _, ev := range tc.before {
				p.Step(ev)
			}
			got := withoutSubjects(p.Step(tc.ev))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Step(%#v)\n got %#v\nwant %#v", tc.ev, got, tc.want)
			}
			if code := failureCode(p); code != tc.code {
				t.Errorf("failure code %d, want %d", code, tc.code)
			}
			if p.Phase() != tc.phase {
				t.Errorf("phase %v, want %v", p.Phase(), tc.phase)
			}
		})
	}
}

// withoutSubjects keeps only the reason of each Record in acts (their
// subjects are TestRecordSubjects'), for comparing with a table's actions.
func withoutSubjects(acts []Action) []Action {
	for i, a := range acts {
		if r, ok := a.(Record); ok {
			acts[i] = Record{Why: r.Why}
		}
	}
	return acts
}

// failureCode is the exit code of the job's failure, 0 without one.
func failureCode(p *Planner) int {
	if f := p.Failure(); f != nil {
		return f.Code
	}
	return 0
}

// TestOneDecisionPerJob drives the planner through every order of a few
// failures: exactly one of them terminates the job, the first, and its
// failure is the one kept.
func TestOneDecisionPerJob(t *testing.T) {
	evs := []Event{
		RankExited{Rank: 0, Node: "n0", Code: 3},
		AgentLost{Node: "n1", Err: "EOF"},
		TimedOut{Limit: time.Second},
		RankAborted{Rank: 2, Node: "n1", Code: 4},
		ProtocolError{Node: "n0", Err: "x"},
	}
	var permute func([]Event, int)
	n := 0
	permute = func(a []Event, k int) {
		if k == len(a) {
			n++
			p := New(Config{Ranks: 4})
			terms, first := 0, Reason{}
			for i, ev := range a {
				for _, act := range p.Step(ev) {
					if _, ok := act.(Terminate); ok {
						terms++
					}
					if r, ok := act.(Record); ok && i == 0 {
						first = r.Why
					}
				}
			}
			if terms != 1 || p.Failure() == nil || !reflect.DeepEqual(p.Failure().Why, first) {
				t.Fatalf("order %v: %d terminations, failure %+v, first %+v", a, terms, p.Failure(), first)
			}
			return
		}
		for i := k; i < len(a); i++ {
			a[k], a[i] = a[i], a[k]
			permute(a, k+1)
			a[k], a[i] = a[i], a[k]
		}
	}
	permute(evs, 0)
	if n != 120 {
		t.Fatalf("%d orders", n)
	}
}

func TestResumedKnowsEndedRanks(t *testing.T) {
	p := New(Config{Ranks: 3, Resumed: true, Ended: []int{0, 2, 9}})
	if acts := p.Step(RankExited{Rank: 2, Node: "n", Code: 1}); acts != nil {
		t.Fatalf("a repeated exit after a failover: %v", acts)
	}
	if acts := p.Step(RankExited{Rank: 1, Node: "n", Code: 1}); len(acts) != 3 {
		t.Fatalf("the first exit of a rank not known ended: %v", acts)
	}
}

func TestUnknownEventPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	New(Config{}).Step(nil)
}

// TestRecordSubjects: a failure's record names its node and rank.
func TestRecordSubjects(t *testing.T) {
	for _, tc := range []struct {
		ev   Event
		node string
		rank int
	}{
		{RankExited{Rank: 2, Node: "n1", Code: 1}, "n1", 2},
		{RankAborted{Rank: 1, Node: "n0", Code: 3}, "n0", 1},
		{AgentLost{Node: "n3", Err: "EOF"}, "n3", NoRank},
		{ProtocolError{Node: "n2", Err: "x"}, "n2", NoRank},
		{TimedOut{Limit: time.Second}, "", NoRank},
	} {
		acts := New(Config{Ranks: 4}).Step(tc.ev)
		if r, ok := acts[0].(Record); !ok || r.Node != tc.node || r.Rank != tc.rank {
			t.Errorf("%#v: %#v", tc.ev, acts[0])
		}
	}
}
