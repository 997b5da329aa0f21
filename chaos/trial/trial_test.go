package trial

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/fence"
)

// kary2 is the kary:2 plan over 6 test nodes: node0 and node1 under the
// root, node2..node5 under them; replicas on node0 and node1; 2 ranks per
// node.
func kary2() Topology {
	return Topology{
		Parent:   []int{-1, -1, 0, 0, 1, 1},
		Replicas: []int{0, 1},
		RankNode: []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5},
	}
}

func testConfig() Config {
	return Config{Cluster: TestNodes, When: Any, Concurrent: 1, Replicas: 1, RunLength: 2 * time.Second}
}

func TestScheduleIsDeterministic(t *testing.T) {
	topo := kary2()
	for _, conc := range []int{1, 2} {
		cfg := testConfig()
		cfg.Concurrent = conc
		for i := range 50 {
			seed := TrialSeed(42, i)
			a, err := Schedule(i, seed, cfg, topo)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Schedule(i, seed, cfg, topo)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("seed %d: two schedules differ:\n%+v\n%+v", seed, a, b)
			}
			if len(a.Actions) != conc {
				t.Fatalf("seed %d: %d actions, want %d", seed, len(a.Actions), conc)
			}
		}
	}
	// The first trial's seed is the run's: --seed S --trials 1 replays it.
	if TrialSeed(99, 0) != 99 || TrialSeed(99, 1) == TrialSeed(99, 2) {
		t.Fatal("trial seeds: the first must be the run's, the others distinct")
	}
}

// Over many seeds every fault, both phases and every kind of target turn
// up, and each action's target fits its fault.
func TestScheduleCoversAndFits(t *testing.T) {
	topo := kary2()
	cfg := testConfig()
	cfg.Replicas = 3
	cfg.Concurrent = 2
	seen := map[Fault]bool{}
	phases := map[Phase]bool{}
	for i := range 400 {
		tr, err := Schedule(i, TrialSeed(7, i), cfg, topo)
		if err != nil {
			t.Fatal(err)
		}
		phases[tr.Phase] = true
		if (tr.Phase == Launch) != (tr.Hold >= 0) {
			t.Fatalf("trial %d: phase %s, hold %d", i, tr.Phase, tr.Hold)
		}
		hit := map[int]bool{}
		for k, a := range tr.Actions {
			seen[a.Fault] = true
			n := a.Target.Node
			switch a.Fault {
			case Root, Stall, RaftCut:
				if n != -1 {
					t.Fatalf("root fault on node %d", n)
				}
				continue
			case Rank:
				if topo.RankNode[a.Target.Rank] != n {
					t.Fatalf("rank %d is not on node %d", a.Target.Rank, n)
				}
			case Leaf:
				if len(topo.Children(n)) != 0 {
					t.Fatalf("leaf fault on interior node%d", n)
				}
			case Interior:
				if len(topo.Children(n)) == 0 {
					t.Fatalf("interior fault on leaf node%d", n)
				}
			case Replica:
				if !slices.Contains(topo.Replicas, n) {
					t.Fatalf("replica fault on node%d", n)
				}
			}
			if n == tr.Hold {
				t.Fatalf("trial %d: fault on the held node%d: %+v", i, n, tr)
			}
			if hit[n] {
				t.Fatalf("trial %d: node%d hit twice: %+v", i, n, tr)
			}
			hit[n] = true
			if a.AfterPrevious != (k > 0) || a.AfterPrevious && a.At != 0 {
				t.Fatalf("trial %d: action %d: %+v", i, k, a)
			}
			if tr.Phase == Run && a.At > cfg.RunLength/2 {
				t.Fatalf("run-phase fault at %v, after half the run", a.At)
			}
		}
	}
	for _, f := range []Fault{Rank, Agent, Leaf, Interior, Root, Replica, Stop, Slow, Stall, RaftCut} {
		if !seen[f] {
			t.Errorf("fault %s never scheduled", f)
		}
	}
	if seen[Node] || seen[Partition] {
		t.Error("emulated-cluster faults scheduled on test nodes")
	}
	if !phases[Launch] || !phases[Run] {
		t.Errorf("phases seen: %v", phases)
	}
}

func TestValidateRefuses(t *testing.T) {
	flat := Topology{Parent: []int{-1, -1, -1}, RankNode: []int{0, 1, 2}}
	for _, tc := range []struct {
		faults   []Fault
		topo     Topology
		replicas int
		want     string
	}{
		{[]Fault{Replica}, kary2(), 1, `fault "replica" has no target`},
		{[]Fault{Interior}, flat, 1, `fault "interior" has no target`},
		{[]Fault{RaftCut}, flat, 1, `fault "raftcut" has no target`},
		{[]Fault{Node}, kary2(), 1, "needs --cluster emulated"},
		{[]Fault{Partition}, kary2(), 1, "needs --cluster emulated"},
	} {
		cfg := testConfig()
		cfg.Faults, cfg.Replicas = tc.faults, tc.replicas
		err := Validate(cfg, tc.topo)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("faults %v: %v, want %q", tc.faults, err, tc.want)
		}
	}
	// The default set leaves out what has no target.
	if got := Available(TestNodes, flat, 1); slices.Contains(got, Interior) || slices.Contains(got, Replica) || slices.Contains(got, Node) {
		t.Errorf("available on a flat tree: %v", got)
	}
	if got := Available(TestNodes, flat, 1); slices.Contains(got, RaftCut) {
		t.Errorf("raftcut without a raft group: %v", got)
	}
	if got := Available(TestNodes, kary2(), 3); !slices.Contains(got, Replica) {
		t.Errorf("available with 3 replicas: %v", got)
	}
	if _, err := ParseFaults("rank,bogus"); err == nil {
		t.Error("ParseFaults accepted bogus")
	}
	// --when recovery needs a policy that recovers, and two nodes.
	cfg := testConfig()
	cfg.When = Recovering
	if err := Validate(cfg, kary2()); err == nil || !strings.Contains(err.Error(), "needs --restart rank or job") {
		t.Errorf("--when recovery without a restart policy: %v", err)
	}
	cfg.Policy = RestartRank
	if err := Validate(cfg, Topology{Parent: []int{-1}, RankNode: []int{0, 0}}); err == nil || !strings.Contains(err.Error(), "at least 2 nodes") {
		t.Errorf("--when recovery on one node: %v", err)
	}
}

// --when recovery: a run-phase rank kill triggers the recovery, and the
// trial's faults follow it, the first once the recovery is under way,
// on other nodes than the trigger's.
func TestScheduleRecovery(t *testing.T) {
	cfg := testConfig()
	cfg.When, cfg.Policy = Recovering, RestartRank
	for _, conc := range []int{1, 2} {
		cfg.Concurrent = conc
		for i := range 100 {
			tr, err := Schedule(i, TrialSeed(11, i), cfg, kary2())
			if err != nil {
				t.Fatal(err)
			}
			if tr.Phase != Recovering || tr.Hold != -1 || len(tr.Actions) != conc+1 {
				t.Fatalf("seed %d: %+v", tr.Seed, tr)
			}
			trig := tr.Actions[0]
			if !trig.Trigger || trig.Fault != Rank || trig.AfterPrevious || trig.At > cfg.RunLength/2 {
				t.Fatalf("seed %d: trigger %+v", tr.Seed, trig)
			}
			for k, a := range tr.Actions[1:] {
				if a.Trigger || !a.AfterPrevious || a.InRecovery != (k == 0) || a.Target.Node >= 0 && a.Target.Node == trig.Target.Node {
					t.Fatalf("seed %d: fault %d %+v after trigger %+v", tr.Seed, k+1, a, trig)
				}
			}
		}
	}
}

func applied(f Fault, target Target) Applied {
	return Applied{Action: Action{Fault: f, Target: target}, Time: time.Unix(100, 0), PID: 1234}
}

// formed is a after the raft group formed.
func formed(a Applied) Applied {
	a.GroupFormed = true
	return a
}

// good is the outcome of a trial that did what was promised for an agent
// fault on node3.
func good() Outcome {
	return Outcome{
		State: "finished", ExitCode: 1, Message: "lost the agent of node node3: EOF",
		Failures: []Event{{Index: 10, Detail: "lost the agent of node node3: EOF"}},
		EndIndex: 12, Versions: [][2]uint64{{0, 1}, {0, 2}, {0, 2}},
		Replicas:     []ReplicaState{{Node: "fe", Digest: "aa"}},
		Lines:        []string{"[0] step 1 rank 0", "[1] step 1 rank 1"},
		OutputUnique: true, AppChecked: true,
	}
}

// The checker names the invariant each planted violation breaks, first.
func TestCheckNamesTheInvariant(t *testing.T) {
	topo := kary2()
	acts := []Applied{applied(Agent, Target{Node: 3, Rank: -1})}
	exp := Expect(acts, topo, 1, NoRestart, Run, "fe")
	if vs := Check(acts, exp, good()); len(vs) != 0 {
		t.Fatalf("a good outcome fails: %v", vs)
	}
	for _, tc := range []struct {
		name  string
		plant func(o *Outcome)
		want  string
	}{
		{"process left", func(o *Outcome) { o.Left = []string{"4242 (sleep 300)"} }, InvNoLeft},
		{"completed after a kill", func(o *Outcome) { o.ExitCode, o.Message = 0, "" }, InvStatus},
		{"message names another node", func(o *Outcome) { o.Message = "lost the agent of node node33: EOF" }, InvStatus},
		{"no final status", func(o *Outcome) { o.State = "unfinished" }, InvStatus},
		{"still running", func(o *Outcome) { o.State = "running" }, InvStatus},
		{"failure after the end", func(o *Outcome) { o.Failures = append(o.Failures, Event{Index: 13, Detail: "late"}) }, InvPaired},
		{"no failure logged", func(o *Outcome) { o.Failures = nil }, InvPaired},
		{"digests differ", func(o *Outcome) {
			o.Replicas = append(o.Replicas, ReplicaState{Node: "node1", Digest: "bb"})
		}, InvDigests},
		{"epoch went back", func(o *Outcome) { o.Versions = [][2]uint64{{1, 3}, {0, 4}} }, InvMonotonic},
		{"state broken", func(o *Outcome) { o.StateProblems = []string{"rank 3 on an unknown node"} }, InvState},
		{"line twice", func(o *Outcome) { o.Lines = append(o.Lines, o.Lines[0]) }, InvOutput},
		{"stopped agent not fenced", func(o *Outcome) {
			o.Stale = []Stale{{Node: "node2", Fault: Stop, Lost: true, Answers: true, AtEnd: []string{"77 (ftlaunch agent)"}}}
		}, InvStale},
		{"returning agent lingers", func(o *Outcome) {
			o.Stale = []Stale{{Node: "node2", Fault: Partition, Lost: true, Back: true, Left: []string{"77 (ftlaunch agent)"}}}
		}, InvStale},
		{"incarnations overlap", func(o *Outcome) {
			t0 := time.Unix(100, 0)
			o.Spans = []RankSpan{{Rank: 5, Inc: 1, Node: "node2", Start: t0, End: t0.Add(3 * time.Second)},
				{Rank: 5, Inc: 2, Node: "node9", Start: t0.Add(2900 * time.Millisecond)}}
		}, InvApart},
	} {
		o := good()
		tc.plant(&o)
		vs := Check(acts, exp, o)
		if len(vs) == 0 || vs[0].Invariant != tc.want {
			t.Errorf("%s: violations %v, want %s first", tc.name, vs, tc.want)
		}
	}
	// What a cut-off host (no answer: not fenced from outside) or an
	// agent never declared lost still runs at the end is no violation,
	// nor is an orphan's documented wait once back.
	for _, st := range []Stale{
		{Node: "node2", Fault: Partition, Lost: true, AtEnd: []string{"77"}},
		{Node: "node2", Fault: Stop, Answers: true, AtEnd: []string{"77"}},
		{Node: "node2", Fault: Stop, Lost: true, Answers: true, Back: true, Left: []string{"77"}, Limit: true},
	} {
		o := good()
		o.Stale = []Stale{st}
		if vs := Check(acts, exp, o); len(vs) != 0 {
			t.Errorf("%+v: %v", st, vs)
		}
	}
	// A lagging replica of a killed node is not compared.
	o := good()
	o.Replicas = append(o.Replicas, ReplicaState{Node: "node3", Digest: "cc"})
	if vs := Check(acts, exp, o); len(vs) != 0 {
		t.Errorf("the killed node's replica was compared: %v", vs)
	}
	// A replica that never joined the group (the job ended before it
	// formed) holds an empty log: not compared; one that joined is.
	o = good()
	o.Replicas = append(o.Replicas, ReplicaState{Node: "node1", Digest: "ee", NeverJoined: true})
	if vs := Check(acts, exp, o); len(vs) != 0 {
		t.Errorf("a replica that never joined was compared: %v", vs)
	}
	o.Replicas[len(o.Replicas)-1].NeverJoined = false
	if vs := Check(acts, exp, o); len(vs) == 0 || vs[0].Invariant != InvDigests {
		t.Errorf("a joined replica's differing digest: %v", vs)
	}
	// No fault applied at all is a failed trial, not a pass.
	skipped := []Applied{{Action: Action{Fault: Rank, Target: Target{Node: 0, Rank: 1}}, Skipped: "the job ended first"}}
	co := good()
	co.ExitCode, co.Message, co.Failures, co.AppOK = 0, "", nil, true
	if vs := Check(skipped, Expect(skipped, topo, 1, NoRestart, Run, "fe"), co); len(vs) != 1 || vs[0].Invariant != InvFaultFired {
		t.Errorf("no fault applied: %v", vs)
	}
	// A completed job must show the application's result.
	co.AppOK = false
	slow := []Applied{applied(Slow, Target{Node: 2, Rank: -1})}
	if vs := Check(slow, Expect(slow, topo, 1, NoRestart, Run, "fe"), co); len(vs) != 1 || vs[0].Invariant != InvAppResult {
		t.Errorf("completed without the result: %v", vs)
	}
	co.AppOK = true
	if vs := Check(slow, Expect(slow, topo, 1, NoRestart, Run, "fe"), co); len(vs) != 0 {
		t.Errorf("a slow agent's completed job: %v", vs)
	}
	// Under --restart rank, a completed job's failures were recovered.
	ranked := []Applied{applied(Rank, Target{Node: 2, Rank: 5})}
	re := Expect(ranked, topo, 1, RestartRank, Run, "fe")
	co.Failures = []Event{{Index: 7, Detail: "rank 5 on node node2 was killed by signal 9"}}
	co.Recoveries = []Recovery{{Subject: "rank 5", Outcome: "resumed", Done: true}}
	if vs := Check(ranked, re, co); len(vs) != 0 {
		t.Errorf("a recovered rank: %v", vs)
	}
	co.Recoveries[0].Outcome, co.Recoveries[0].Done = "in progress", false
	if vs := Check(ranked, re, co); len(vs) != 1 || vs[0].Invariant != InvRecovered {
		t.Errorf("a recovery left in progress: %v", vs)
	}
	co.Recoveries = nil
	if vs := Check(ranked, re, co); len(vs) != 1 || vs[0].Invariant != InvRecovered {
		t.Errorf("no recovery in the log: %v", vs)
	}
}

// TestOverlap: two incarnations of a rank overlap when the later one
// started before the earlier one ended, whatever their nodes; an end
// nobody recorded is not judged.
func TestOverlap(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name  string
		spans []RankSpan
		want  bool
	}{
		{"apart", []RankSpan{{Rank: 1, Inc: 1, Node: "n2", Start: at(0), End: at(2000)}, {Rank: 1, Inc: 2, Node: "n9", Start: at(2001), End: at(5000)}}, false},
		{"replacement before the fence", []RankSpan{{Rank: 1, Inc: 1, Node: "n2", Start: at(0), End: at(2134)}, {Rank: 1, Inc: 2, Node: "n9", Start: at(2000)}}, true},
		{"three incarnations, the third early", []RankSpan{
			{Rank: 1, Inc: 1, Start: at(0), End: at(100)}, {Rank: 1, Inc: 2, Start: at(200), End: at(900)}, {Rank: 1, Inc: 3, Start: at(800)}}, true},
		{"other ranks do not count", []RankSpan{{Rank: 1, Inc: 1, Start: at(0), End: at(900)}, {Rank: 2, Inc: 2, Start: at(100)}}, false},
		{"no end recorded (a crashed host the harness did not kill)", []RankSpan{{Rank: 1, Inc: 1, Start: at(0)}, {Rank: 1, Inc: 2, Start: at(100)}}, false},
		{"same incarnation restarted in place", []RankSpan{{Rank: 1, Inc: 1, Start: at(0), End: at(900)}, {Rank: 1, Inc: 1, Start: at(100)}}, false},
	} {
		if got := Overlap(c.spans) != ""; got != c.want {
			t.Errorf("%s: overlap %v (%q), want %v", c.name, got, Overlap(c.spans), c.want)
		}
	}
}

// TestClosestReplacement: the shortest end-to-next-start over the ranks
// that were replaced, negative for an overlap, none without a replacement.
func TestClosestReplacement(t *testing.T) {
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name     string
		spans    []RankSpan
		gap      time.Duration
		rank     int
		replaced bool
	}{
		{"none replaced", []RankSpan{{Rank: 1, Inc: 1, Start: at(0)}, {Rank: 2, Inc: 1, Start: at(0)}}, 0, 0, false},
		{"the closer of two", []RankSpan{
			{Rank: 1, Inc: 1, Start: at(0), End: at(2000)}, {Rank: 1, Inc: 2, Start: at(2300)},
			{Rank: 4, Inc: 1, Start: at(0), End: at(2100)}, {Rank: 4, Inc: 2, Start: at(2220)},
		}, 120 * time.Millisecond, 4, true},
		{"an overlap is negative", []RankSpan{{Rank: 3, Inc: 1, Start: at(0), End: at(2134)}, {Rank: 3, Inc: 2, Start: at(2000)}}, -134 * time.Millisecond, 3, true},
		{"no end recorded", []RankSpan{{Rank: 1, Inc: 1, Start: at(0)}, {Rank: 1, Inc: 2, Start: at(100)}}, 0, 0, false},
	} {
		gap, rank, ok := ClosestReplacement(c.spans)
		if ok != c.replaced || ok && (gap != c.gap || rank != c.rank) {
			t.Errorf("%s: %v rank %d (%v), want %v rank %d (%v)", c.name, gap, rank, ok, c.gap, c.rank, c.replaced)
		}
	}
}

// TestSpansOf: one span per rank incarnation and node, from its first
// start to its last end (a rank's descendants end after it).
func TestSpansOf(t *testing.T) {
	t0 := time.Unix(100, 0)
	times := []fence.RankTime{
		{Node: "n2", Rank: 1, Inc: 1, Start: true, Time: t0},
		{Node: "n2", Rank: 1, Inc: 1, Time: t0.Add(time.Second)},
		{Node: "n2", Rank: 1, Inc: 1, Time: t0.Add(2 * time.Second)}, // the fence, for a descendant
		{Node: "n9", Rank: 1, Inc: 2, Start: true, Time: t0.Add(3 * time.Second)},
	}
	got := SpansOf(times)
	want := []RankSpan{{Rank: 1, Inc: 1, Node: "n2", Start: t0, End: t0.Add(2 * time.Second)}, {Rank: 1, Inc: 2, Node: "n9", Start: t0.Add(3 * time.Second)}}
	if !slices.Equal(got, want) {
		t.Fatalf("spans %+v, want %+v", got, want)
	}
}

func TestExpect(t *testing.T) {
	topo := kary2()
	root := applied(Root, Target{Node: -1, Rank: -1})
	rank := applied(Rank, Target{Node: 2, Rank: 5})
	for _, tc := range []struct {
		name     string
		acts     []Applied
		replicas int
		want     []Ending
	}{
		{"root, one replica", []Applied{root}, 1, []Ending{Unfinished}},
		{"root, group formed", []Applied{{Action: root.Action, Time: root.Time, GroupFormed: true}}, 3, []Ending{Completed}},
		{"root, no group yet", []Applied{root}, 3, []Ending{Unfinished}},
		{"rank and root", []Applied{rank, root}, 1, []Ending{Failed, Unfinished}},
		{"slow", []Applied{applied(Slow, Target{Node: 1, Rank: -1})}, 1, []Ending{Completed}},
		{"stalled front-end", []Applied{applied(Stall, Target{Node: -1, Rank: -1})}, 1, []Ending{Completed}},
		{"stalled front-end, group formed", []Applied{{Action: Action{Fault: Stall, Target: Target{Node: -1, Rank: -1}}, Time: root.Time, GroupFormed: true}}, 3, []Ending{Completed}},
		{"raft traffic cut, group formed", []Applied{{Action: Action{Fault: RaftCut, Target: Target{Node: -1, Rank: -1}}, Time: root.Time, GroupFormed: true}}, 3, []Ending{Completed}},
		{"skipped", []Applied{{Action: rank.Action, Skipped: "gone"}}, 1, []Ending{Completed}},
	} {
		if got := Expect(tc.acts, topo, tc.replicas, NoRestart, Run, "fe").Endings; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	e := Expect([]Applied{applied(Interior, Target{Node: 0, Rank: -1})}, topo, 3, NoRestart, Run, "fe")
	if !reflect.DeepEqual(e.Lost, []string{"node0", "node2", "node3"}) || !reflect.DeepEqual(e.Names, []string{"node0"}) {
		t.Errorf("interior node0: lost %v, names %v", e.Lost, e.Names)
	}
	// Under the restart policies.
	agent := applied(Leaf, Target{Node: 3, Rank: -1})
	for _, tc := range []struct {
		name    string
		acts    []Applied
		policy  Policy
		phase   Phase
		want    []Ending
		recover bool
	}{
		{"rank, rank, run", []Applied{rank}, RestartRank, Run, []Ending{Completed}, true},
		// Before the table: ended if a rank had opened the protocol,
		// started again alone if none had (the runner cannot tell).
		{"rank, rank, launch", []Applied{rank}, RestartRank, Launch, []Ending{Completed, Failed}, true},
		{"rank, job, launch", []Applied{rank}, RestartJob, Launch, []Ending{Completed}, true},
		{"two ranks, job, run", []Applied{rank, applied(Rank, Target{Node: 0, Rank: 1})}, RestartJob, Run, []Ending{Completed}, true},
		{"agent below an agent, rank", []Applied{agent}, RestartRank, Run, []Ending{Completed}, true},
		{"interior agent, job", []Applied{applied(Interior, Target{Node: 0, Rank: -1})}, RestartJob, Run, []Ending{Completed}, true},
		{"agent below an agent, rank, launch", []Applied{agent}, RestartRank, Launch, []Ending{Completed, Failed}, true},
		{"agent below an agent, job, launch", []Applied{agent}, RestartJob, Launch, []Ending{Completed}, true},
		{"interior agent, job, launch", []Applied{applied(Interior, Target{Node: 0, Rank: -1})}, RestartJob, Launch, []Ending{Completed}, true},
		{"rank and agent, rank", []Applied{rank, agent}, RestartRank, Run, []Ending{Completed}, true},
		{"rank and root, rank", []Applied{rank, root}, RestartRank, Run, []Ending{Unfinished}, true},
	} {
		e := Expect(tc.acts, topo, 1, tc.policy, tc.phase, "fe")
		if !reflect.DeepEqual(e.Endings, tc.want) || e.Recover != tc.recover {
			t.Errorf("%s: %v recover %v, want %v recover %v", tc.name, e.Endings, e.Recover, tc.want, tc.recover)
		}
	}
	// A flat tree: every agent is a child of the root with none below it;
	// with a spare (node3), a silent one is started again on it, a second
	// silent one finds none left.
	flat := Topology{Parent: []int{-1, -1, -1}, RankNode: []int{0, 0, 1, 1, 2, 2}, Replicas: []int{0, 1}}
	spared := flat
	spared.Spares = []string{"node3"}
	leaf2, stop2 := applied(Leaf, Target{Node: 2, Rank: -1}), applied(Stop, Target{Node: 2, Rank: -1})
	for _, tc := range []struct {
		name     string
		topo     Topology
		acts     []Applied
		policy   Policy
		phase    Phase
		replicas int
		want     []Ending
		names    []string // checked when set
	}{
		{"leaf, rank, run", flat, []Applied{leaf2}, RestartRank, Run, 1, []Ending{Completed}, nil},
		{"leaf, job, run", flat, []Applied{leaf2}, RestartJob, Run, 1, []Ending{Completed}, nil},
		{"leaf, none", flat, []Applied{leaf2}, NoRestart, Run, 1, []Ending{Failed}, nil},
		{"leaf, rank, launch", flat, []Applied{leaf2}, RestartRank, Launch, 1, []Ending{Completed, Failed}, []string{"node2"}},
		{"leaf, job, launch", flat, []Applied{leaf2}, RestartJob, Launch, 1, []Ending{Completed}, nil},
		{"leaf hosting a replica", flat, []Applied{formed(applied(Leaf, Target{Node: 1, Rank: -1}))}, RestartRank, Run, 3, []Ending{Completed}, nil},
		{"replica's host before the group formed", flat, []Applied{applied(Replica, Target{Node: 1, Rank: -1})}, RestartRank, Run, 3, []Ending{Completed, Unfinished}, nil},
		{"stopped leaf, no spare", flat, []Applied{stop2}, RestartRank, Run, 1, []Ending{Failed}, nil},
		{"stop, rank", spared, []Applied{stop2}, RestartRank, Run, 1, []Ending{Completed}, nil},
		{"stop, job", spared, []Applied{stop2}, RestartJob, Run, 1, []Ending{Completed}, nil},
		{"crash, rank, in a recovery", spared, []Applied{applied(Node, Target{Node: 2, Rank: -1})}, RestartRank, Recovering, 1, []Ending{Completed}, nil},
		{"stop, none", spared, []Applied{stop2}, NoRestart, Run, 1, []Ending{Failed}, []string{"node2"}},
		{"stop, launch, no table", spared, []Applied{stop2}, RestartRank, Launch, 1, []Ending{Completed, Failed}, []string{"node2"}},
		{"stop, job, launch, no table", spared, []Applied{stop2}, RestartJob, Launch, 1, []Ending{Completed}, nil},
		{"stop, job, launch, no spare", flat, []Applied{stop2}, RestartJob, Launch, 1, []Ending{Failed}, []string{"node2"}},
		{"two silent, one spare, job, launch", spared, []Applied{stop2, applied(Node, Target{Node: 0, Rank: -1})}, RestartJob, Launch, 1, []Ending{Failed}, []string{"node2", "node0"}},
		{"stop, launch, after the table", spared, []Applied{{Action: stop2.Action, Time: stop2.Time, Tabled: true}}, RestartRank, Launch, 1, []Ending{Completed}, nil},
		{"stopped replica host", spared, []Applied{formed(applied(Stop, Target{Node: 1, Rank: -1}))}, RestartRank, Run, 3, []Ending{Completed}, nil},
		{"two silent, one spare", spared, []Applied{stop2, applied(Partition, Target{Node: 0, Rank: -1})}, RestartRank, Run, 1, []Ending{Failed}, []string{"node2", "node0"}},
		{"a kill and a stop, one spare", spared, []Applied{applied(Leaf, Target{Node: 0, Rank: -1}), stop2}, RestartRank, Run, 1, []Ending{Completed}, nil},
	} {
		e := Expect(tc.acts, tc.topo, tc.replicas, tc.policy, tc.phase, "fe")
		if !reflect.DeepEqual(e.Endings, tc.want) || tc.names != nil && !reflect.DeepEqual(e.Names, tc.names) {
			t.Errorf("flat with spares %v, %s: %v naming %v, want %v naming %v", tc.topo.Spares, tc.name, e.Endings, e.Names, tc.want, tc.names)
		}
	}
	if e := Expect([]Applied{applied(Stop, Target{Node: 0, Rank: -1})}, func() Topology { k := kary2(); k.Spares = []string{"node6"}; return k }(),
		1, RestartRank, Run, "fe"); !reflect.DeepEqual(e.Endings, []Ending{Completed}) || !reflect.DeepEqual(e.Lost, []string{"node0"}) {
		t.Errorf("stopped interior agent with a spare (its children move to their backups): %+v", e)
	}
	if !Names("rank 5 on node node2 was killed", []string{"rank 5"}) || Names("rank 15 on node node7", []string{"rank 5"}) {
		t.Error("Names matches whole words only")
	}
}

// emulated4 is the kary:2 plan over 4 emulated hosts: node001 and node002
// under the root, node003 and node004 under node001; 2 ranks per host.
func emulated4() Topology {
	return Topology{
		Parent:   []int{-1, -1, 0, 0},
		Replicas: []int{0, 1},
		RankNode: []int{0, 0, 1, 1, 2, 2, 3, 3},
		Names:    []string{"node001", "node002", "node003", "node004"},
	}
}

// On the emulated cluster node and partition are in the default set,
// targets carry the hosts' names, a host fault takes its subtree out of
// the second fault's reach, and the promise names the host.
func TestEmulatedScheduleAndExpect(t *testing.T) {
	topo := emulated4()
	cfg := testConfig()
	cfg.Cluster = Emulated
	if got := Available(Emulated, topo, 1); !slices.Contains(got, Node) || !slices.Contains(got, Partition) {
		t.Fatalf("available on the emulated cluster: %v", got)
	}
	// Run phase: a launch would hold one of the four hosts back, and a
	// fault on node001 takes three.
	cfg.Faults, cfg.Concurrent, cfg.When = []Fault{Node, Partition, Stop}, 2, Run
	seen := map[Fault]bool{}
	for i := range 200 {
		tr, err := Schedule(i, TrialSeed(3, i), cfg, topo)
		if err != nil {
			t.Fatal(err)
		}
		first := tr.Actions[0].Target
		for k, a := range tr.Actions {
			seen[a.Fault] = true
			if want := topo.Names[a.Target.Node]; a.Target.String() != want || a.String() != string(a.Fault)+" "+want {
				t.Fatalf("seed %d: target %q (%q), want %s", tr.Seed, a.Target, a, want)
			}
			if k > 0 && slices.Contains(topo.Subtree(first.Node), a.Target.Node) {
				t.Fatalf("seed %d: second fault on %s, in the subtree of the first's %s", tr.Seed, a.Target, first)
			}
		}
	}
	if !seen[Node] || !seen[Partition] || !seen[Stop] {
		t.Errorf("faults seen: %v", seen)
	}
	// A crashed or cut-off host ends the job under every policy today (a
	// silent node is not tried again): its name, its subtree's replicas lost.
	for _, f := range []Fault{Node, Partition} {
		for _, p := range []Policy{NoRestart, RestartRank, RestartJob} {
			e := Expect([]Applied{formed(applied(f, Target{Node: 0, Rank: -1, Name: "node001"}))}, topo, 3, p, Run, "head")
			if !reflect.DeepEqual(e.Endings, []Ending{Failed}) || !reflect.DeepEqual(e.Names, []string{"node001"}) ||
				!reflect.DeepEqual(e.Lost, []string{"node001", "node003", "node004"}) || e.Recover {
				t.Errorf("%s node001, --restart %s: %+v", f, p, e)
			}
		}
		// Even a host under the root with nothing below it: the leaf
		// agent relaunch is for a killed agent on a live host.
		e := Expect([]Applied{applied(f, Target{Node: 1, Rank: -1, Name: "node002"})}, topo, 1, RestartRank, Run, "head")
		if !reflect.DeepEqual(e.Endings, []Ending{Failed}) || e.Recover {
			t.Errorf("%s node002, --restart rank: %+v", f, e)
		}
	}
	// A replica's host lost before every replica agent joined: the group
	// may have lost its majority (docs/guide.md), so the job may also end
	// unfinished, its failure open; once the group formed it may not.
	lostEarly := applied(Node, Target{Node: 1, Rank: -1, Name: "node002"})
	e := Expect([]Applied{lostEarly}, topo, 3, NoRestart, Launch, "head")
	if !reflect.DeepEqual(e.Endings, []Ending{Failed, Unfinished}) || !e.NoMajority {
		t.Errorf("node002 lost before the group formed: %+v", e)
	}
	open := Outcome{State: "unfinished", Failures: []Event{{Index: 9, Detail: "lost the agent of node node002: EOF"}},
		StateProblems: []string{`failure of node "node002" incarnation 1 (event 17) has no recovery and the job has not ended`}}
	if vs := Check([]Applied{lostEarly}, e, open); len(vs) != 0 {
		t.Errorf("no majority, unfinished: %v", vs)
	}
	// The root lost in the middle of a recovery, with one replica: the log
	// ends there, unfinished, its failure without recovery or end.
	rankRoot := []Applied{applied(Rank, Target{Node: 1, Rank: 2}), applied(Root, Target{Node: -1, Rank: -1})}
	if vs := Check(rankRoot, Expect(rankRoot, topo, 1, RestartRank, Recovering, "head"), open); len(vs) != 0 {
		t.Errorf("root lost during a recovery, unfinished: %v", vs)
	}
	lostEarly.GroupFormed = true
	if e := Expect([]Applied{lostEarly}, topo, 3, NoRestart, Launch, "head"); !reflect.DeepEqual(e.Endings, []Ending{Failed}) || e.NoMajority {
		t.Errorf("node002 lost after the group formed: %+v", e)
	} else if vs := Check([]Applied{lostEarly}, e, open); len(vs) == 0 || vs[0].Invariant != InvStatus {
		t.Errorf("unfinished after the group formed: %v", vs)
	}
	// A slow link completes.
	if e := Expect([]Applied{applied(Slow, Target{Node: 2, Rank: -1, Name: "node003"})}, topo, 1, NoRestart, Run, "head"); !reflect.DeepEqual(e.Endings, []Ending{Completed}) {
		t.Errorf("slow node003: %+v", e)
	}
}

// The promise by program (docs/recovery.md's support matrix): under job
// every program recovers a rank or an agent at any time; under rank a
// plain program's ranks start again alone at any time, a client-library
// program's before its table may end the job (a rank opened the
// protocol) or start again alone (none had), which the runner cannot
// tell apart; MPI under rank is refused.
func TestExpectPrograms(t *testing.T) {
	topo := kary2()
	topo.Spares = []string{"node6"}
	rank := applied(Rank, Target{Node: 2, Rank: 5})
	leaf := applied(Leaf, Target{Node: 3, Rank: -1})
	interior := applied(Interior, Target{Node: 0, Rank: -1})
	stop := applied(Stop, Target{Node: 3, Rank: -1})
	tabled := func(a Applied) Applied { a.Tabled = true; return a }
	both := []Ending{Completed, Failed}
	for _, tc := range []struct {
		prog   Program
		policy Policy
		phase  Phase
		act    Applied
		want   []Ending
		names  []string // checked when not nil
	}{
		{Plain, RestartRank, Launch, rank, []Ending{Completed}, nil},
		{Plain, RestartRank, Launch, leaf, []Ending{Completed}, nil},
		{Plain, RestartRank, Launch, interior, []Ending{Completed}, nil},
		{Plain, RestartRank, Launch, stop, []Ending{Completed}, nil},
		{Plain, RestartRank, Run, leaf, []Ending{Completed}, nil},
		{Plain, RestartJob, Launch, stop, []Ending{Completed}, nil},
		{Plain, NoRestart, Launch, leaf, []Ending{Failed}, []string{"node3"}},
		{Library, RestartRank, Launch, leaf, both, []string{"node3"}},
		{Library, RestartRank, Launch, interior, both, []string{"node0"}},
		{Library, RestartRank, Launch, tabled(leaf), []Ending{Completed}, nil},
		{Library, RestartRank, Launch, rank, both, []string{"rank 5"}},
		{Library, RestartJob, Launch, interior, []Ending{Completed}, nil},
		{MPI, RestartJob, Launch, rank, []Ending{Completed}, nil},
		{MPI, RestartJob, Launch, interior, []Ending{Completed}, nil},
		{MPI, RestartJob, Launch, stop, []Ending{Completed}, nil},
		{MPI, RestartJob, Run, applied(Node, Target{Node: 1, Rank: -1}), []Ending{Completed}, nil},
		{MPI, NoRestart, Run, leaf, []Ending{Failed}, []string{"node3"}},
	} {
		e := ExpectFor(tc.prog, []Applied{tc.act}, topo, 1, tc.policy, tc.phase, "fe")
		if !reflect.DeepEqual(e.Endings, tc.want) || tc.names != nil && !reflect.DeepEqual(e.Names, tc.names) ||
			e.Recover != (tc.policy != NoRestart) {
			t.Errorf("%s, %s, %s, %s: %v naming %v (recover %v), want %v naming %v", tc.prog, tc.policy, tc.phase, tc.act.Action,
				e.Endings, e.Names, e.Recover, tc.want, tc.names)
		}
	}
	// A plain program's silent node with no spare ends the job under
	// every policy: the judge does not loosen what the planner refuses.
	if e := ExpectFor(Plain, []Applied{stop}, kary2(), 1, RestartRank, Launch, "fe"); !reflect.DeepEqual(e.Endings, []Ending{Failed}) {
		t.Errorf("plain, stop, no spare: %v", e.Endings)
	}
	// Either ending of a maybe is judged: completed needs its recovery,
	// failed must name the fault.
	e := ExpectFor(Library, []Applied{leaf}, topo, 1, RestartRank, Launch, "fe")
	ok := good()
	ok.ExitCode, ok.Message, ok.AppOK = 0, "", true
	ok.Recoveries = []Recovery{{Subject: "node node3", Outcome: "restarted", Done: true}}
	if vs := Check([]Applied{leaf}, e, ok); len(vs) != 0 {
		t.Errorf("completed with its recovery: %v", vs)
	}
	norec := ok
	norec.Recoveries = nil
	if vs := Check([]Applied{leaf}, e, norec); len(vs) != 1 || vs[0].Invariant != InvRecovered {
		t.Errorf("completed with no recovery: %v", vs)
	}
	failed := good()
	failed.Message = "lost the agent of node node3: EOF; it was lost before every rank held the node table; ... the job ends"
	if vs := Check([]Applied{leaf}, e, failed); len(vs) != 0 {
		t.Errorf("failed naming node3: %v", vs)
	}
	failed.Message = "lost the agent of node node2: EOF"
	if vs := Check([]Applied{leaf}, e, failed); len(vs) != 1 || vs[0].Invariant != InvStatus {
		t.Errorf("failed naming another node: %v", vs)
	}
	// An agent lost once every rank had ended: the job may have heard
	// every end (completed) or not yet (failed naming the node).
	late := applied(Replica, Target{Node: 1, Rank: -1})
	late.RanksEnded, late.GroupFormed = true, true
	if e := ExpectFor(Library, []Applied{late}, topo, 3, NoRestart, Run, "fe"); !reflect.DeepEqual(e.Endings, both) || !reflect.DeepEqual(e.Names, []string{"node1"}) {
		t.Errorf("replica's agent killed after every rank ended: %v naming %v", e.Endings, e.Names)
	}
	late.RanksEnded = false
	if e := ExpectFor(Library, []Applied{late}, topo, 3, NoRestart, Run, "fe"); !reflect.DeepEqual(e.Endings, []Ending{Failed}) {
		t.Errorf("replica's agent killed while ranks run: %v", e.Endings)
	}
	// The same under a restart policy: a root that had heard every end
	// records no failure and completes, which promises no recovery; one
	// that had not recovers the agent or ends the job naming it. While
	// ranks run, the agent's loss is a failure that must be recovered.
	quiet := Outcome{State: "finished", EndIndex: 9, AppOK: true, AppChecked: true}
	for _, tc := range []struct {
		policy  Policy
		ended   bool
		want    []Ending
		recover bool
		judged  []string // the invariants a completed job without failure or recovery violates
	}{
		{RestartRank, true, both, false, nil},
		{RestartJob, true, both, false, nil},
		{RestartRank, false, []Ending{Completed}, true, []string{InvRecovered}},
		{RestartJob, false, []Ending{Completed}, true, []string{InvRecovered}},
	} {
		late.RanksEnded = tc.ended
		e := ExpectFor(Library, []Applied{late}, topo, 3, tc.policy, Run, "fe")
		if !reflect.DeepEqual(e.Endings, tc.want) || e.Recover != tc.recover || tc.ended && !reflect.DeepEqual(e.Names, []string{"node1"}) {
			t.Errorf("replica's agent killed, %s, ranks ended %v: %v naming %v (recover %v), want %v (recover %v)",
				tc.policy, tc.ended, e.Endings, e.Names, e.Recover, tc.want, tc.recover)
		}
		var got []string
		for _, v := range Check([]Applied{late}, e, quiet) {
			got = append(got, v.Invariant)
		}
		if !reflect.DeepEqual(got, tc.judged) {
			t.Errorf("replica's agent killed, %s, ranks ended %v, completed with no failure in the log: violations %v, want %v", tc.policy, tc.ended, got, tc.judged)
		}
	}
	// MPI cannot run under --restart rank.
	cfg := testConfig()
	cfg.Program, cfg.Policy = MPI, RestartRank
	if err := Validate(cfg, kary2()); err == nil {
		t.Error("MPI under --restart rank: accepted")
	}
	cfg.Policy = RestartJob
	if err := Validate(cfg, kary2()); err != nil {
		t.Errorf("MPI under --restart job: %v", err)
	}
}

// TestCheckLossAfterPeersEnded: a recovered loss may end the job when the
// lost ranks were started again only after every other rank had ended
// (their restarted incarnations have no peer to rejoin; docs/chaos.md);
// a failure while a peer still ran is a violation.
func TestCheckLossAfterPeersEnded(t *testing.T) {
	acts := []Applied{applied(Leaf, Target{Node: 3, Rank: -1})}
	exp := Expectation{Recover: true, Endings: []Ending{Completed}, Names: []string{"node3"}}
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	failed := func(peerEnd time.Time) Outcome {
		o := good()
		o.Message = "the ranks of node node0 ended without joining collective 4294967296"
		o.Spans = []RankSpan{
			{Rank: 0, Inc: 1, Node: "node0", Start: t0, End: at(5570)},
			{Rank: 1, Inc: 1, Node: "node0", Start: t0, End: peerEnd},
			{Rank: 6, Inc: 1, Node: "node3", Start: t0, End: at(2590)},
			{Rank: 6, Inc: 2, Node: "node9", Start: at(6000), End: at(9000)},
		}
		return o
	}
	if vs := Check(acts, exp, failed(at(5780))); len(vs) != 0 {
		t.Errorf("every peer ended before the restart: %v", vs)
	}
	for name, end := range map[string]time.Time{"a peer ended after the restart": at(6100), "a peer never ended": {}} {
		if vs := Check(acts, exp, failed(end)); len(vs) == 0 || vs[0].Invariant != InvStatus {
			t.Errorf("%s: violations %v, want %s", name, vs, InvStatus)
		}
	}
	if PeersEndedFirst(nil) || PeersEndedFirst([]RankSpan{{Rank: 0, Inc: 2, Start: t0}}) {
		t.Error("no restart, or no peer: not a late loss")
	}
}

// TestCheckNoMajorityDigests: a group left without a majority (the job
// unfinished for it) is not compared: its leader's log holds entries no
// majority took. With the majority kept, a difference is a violation.
func TestCheckNoMajorityDigests(t *testing.T) {
	acts := []Applied{applied(Stop, Target{Node: 1, Rank: -1})}
	o := Outcome{State: "unfinished", Replicas: []ReplicaState{{Node: "vm", Digest: "aa"}, {Node: "node0", Digest: "bb"}}}
	e := Expectation{Endings: []Ending{Failed, Unfinished}, NoMajority: true, Lost: []string{"node1"}}
	for _, v := range Check(acts, e, o) {
		if v.Invariant == InvDigests {
			t.Errorf("no majority: %v", v)
		}
	}
	e.NoMajority = false
	found := false
	for _, v := range Check(acts, e, o) {
		found = found || v.Invariant == InvDigests
	}
	if !found {
		t.Error("a majority kept and the digests differ: no violation")
	}
}
