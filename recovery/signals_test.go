package recovery

import (
	"reflect"
	"testing"
	"time"
)

// TestUserSignalEndsOrForwards: which of the user's signals end the job,
// which are only forwarded, which kill every rank at once, and when a
// rank's death of the user's signal ends the job as the user's rather
// than as a failure.
func TestUserSignalEndsOrForwards(t *testing.T) {
	sig := func(s int, why Reason) []Action {
		why.Rank, why.Signal = NoRank, s
		return []Action{SignalRanks{Signal: s, From: why.Text, Ends: true}, Record{Why: why}, Report{Why: why}, Terminate{}}
	}
	for _, c := range []struct {
		name   string
		before []Event
		ev     Event
		want   []Action
		code   int // the job's exit code after (0: it did not end)
	}{
		{"SIGINT to the front-end ends the job", nil, Signaled{Signal: 2}, sig(2, Reason{Kind: ReasonSignal, Limit: time.Second}), 130},
		{"SIGUSR1 to the front-end is forwarded", nil, Signaled{Signal: 10}, []Action{SignalRanks{Signal: 10}}, 0},
		{"SIGQUIT with ftlaunch kill ends the job", nil, Signaled{Signal: 3, From: "ann"}, sig(3, Reason{Kind: ReasonSignal, Limit: time.Second, Text: "ann"}), 131},
		{"ftlaunch cancel ends the job as SIGTERM", nil, Signaled{Signal: 15, From: "ann", Cancel: true}, append([]Action{SignalRanks{Signal: 15, From: "ann", Ends: true}},
			sig(15, Reason{Kind: ReasonCancel, Limit: time.Second, Text: "ann"})[1:]...), 143},
		{"again while the job ends: every rank killed", []Event{Signaled{Signal: 2}}, Signaled{Signal: 15}, []Action{KillRanks{Signal: 15}}, 130},
		{"after every rank ended: nothing", []Event{Finished{}}, Signaled{Signal: 2}, nil, 0},
		{"SIGHUP to a replicated front-end whose group is up: it leaves the job to it", nil,
			Signaled{Signal: 1, Detach: true, GroupUp: true}, []Action{Detach{}}, 0},
		{"SIGHUP to a replicated front-end before its group is up: said, and the job ends", nil,
			Signaled{Signal: 1, Detach: true}, append([]Action{Report{Why: Reason{Kind: ReasonDetachEarly, Rank: NoRank, Signal: 1}}},
				sig(1, Reason{Kind: ReasonSignal, Limit: time.Second})...), 129},
		{"SIGHUP to a replicated front-end while the job ends: every rank killed", []Event{Signaled{Signal: 2}},
			Signaled{Signal: 1, Detach: true, GroupUp: true}, []Action{KillRanks{Signal: 1}}, 130},
		{"SIGINT to a replicated front-end ends the job", nil,
			Signaled{Signal: 2, Detach: true, GroupUp: true}, sig(2, Reason{Kind: ReasonSignal, Limit: time.Second}), 130},
		{"a rank killed by ftlaunch kill's signal ends the job as the user's", []Event{Signaled{Signal: 10, From: "ann"}},
			RankExited{Rank: 1, Node: "n0", Signal: 10}, []Action{Record{Why: Reason{Kind: ReasonSignalRank, Rank: 1, Signal: 10}},
				Report{Why: Reason{Kind: ReasonSignalRank, Rank: 1, Signal: 10}}, Terminate{}}, 138},
		{"a rank killed by a signal the front-end forwarded failed", []Event{Signaled{Signal: 10}},
			RankExited{Rank: 1, Node: "n0", Signal: 10}, end(rankEnded(1, "n0", 0, 10, RankExited{Signal: 10}.Describe())), 138},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: None, Ranks: 4, KillAfter: time.Second})
			for _, ev := range c.before {
				p.Step(ev)
			}
			got := withoutSubjects(p.Step(c.ev))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
			if code := failureCode(p); code != c.code {
				t.Fatalf("exit code %d, want %d", code, c.code)
			}
		})
	}
}

// TestNotItsFailure: which ranks' ends the job's summary of failed ranks
// leaves out: the ones the job's end killed, a rank never started, and one
// the user's signal killed; not one that failed on its own, even while
// the job ends.
func TestNotItsFailure(t *testing.T) {
	running := Status{Phase: Running}
	ending := Status{Phase: Ending}
	endingUSR1 := Status{Phase: Ending, EndSignal: 10}
	byUser := Status{Phase: Ending, Failure: &Failure{Why: Reason{Kind: ReasonSignalRank, Rank: 2, Signal: 10}}}
	for _, c := range []struct {
		name          string
		ev            RankExited
		skipped       bool
		before, after Status
		want          bool
	}{
		{"SIGTERM while running: its own", RankExited{Rank: 1, Signal: 15}, false, running, ending, false},
		{"SIGTERM while ending: the end's", RankExited{Rank: 1, Signal: 15}, false, ending, ending, true},
		{"SIGKILL while ending: the end's", RankExited{Rank: 1, Signal: 9}, false, ending, ending, true},
		{"exit 3 while ending: its own", RankExited{Rank: 1, Code: 3}, false, ending, ending, false},
		{"the user's signal the end forwards", RankExited{Rank: 1, Signal: 10}, false, endingUSR1, endingUSR1, true},
		{"another signal while the end forwards the user's", RankExited{Rank: 1, Signal: 11}, false, endingUSR1, endingUSR1, false},
		{"never started", RankExited{Rank: 1, Code: 1}, true, running, running, true},
		{"killed by ftlaunch kill's signal", RankExited{Rank: 2, Signal: 10}, false, running, byUser, true},
		{"another rank, as the user's signal ends the job", RankExited{Rank: 3, Signal: 11}, false, running, byUser, false},
	} {
		c.ev.Skipped = c.skipped
		if got := notItsFailure(c.ev, c.before, c.after); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
