package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// launch records a job of len(nodes)*per ranks as the front-end would:
// plan, agents up, ranks started, node table, exits. Rank failRank (if
// >= 0) exits with code 3 and the front-end declares the failure.
func launch(j *Journal, nodes []string, per int, failRank int) {
	j.Plan(FlatPlan(nodes))
	t0 := time.Now()
	for i, n := range nodes {
		j.AgentUp(AgentUp{Node: n, Addr: fmt.Sprintf("10.0.0.%d:7000", i+1), Launched: t0, SSH: time.Duration(i+1) * time.Millisecond,
			Connected: t0.Add(time.Duration(i+2) * time.Millisecond)})
	}
	n := len(nodes) * per
	for i, node := range nodes {
		var ranks, pids []int
		for r := i * per; r < (i+1)*per; r++ {
			ranks = append(ranks, r)
			pids = append(pids, 1000+r)
		}
		j.RanksStarted(node, ranks, pids)
	}
	names := make([]string, n)
	its := make([][]byte, n)
	for r := range n {
		names[r] = nodes[r/per]
		its[r] = fmt.Appendf(nil, "%s:%d", nodes[r/per], 20000+r)
	}
	j.NodeTable(names, its)
	for r := range n {
		if r == failRank {
			j.RankExited(RankExit{Rank: r, Code: 3})
			j.Failure(Failure{Node: nodes[r/per], Rank: r, Message: fmt.Sprintf("rank %d on node %s exited with code 3", r, nodes[r/per])})
			continue
		}
		j.RankExited(RankExit{Rank: r})
	}
}

func open(t testing.TB, dir string, n int) *Journal {
	t.Helper()
	return openCfg(t, Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", Argv: []string{"./app", "-x"}, N: n}})
}

func openCfg(t testing.TB, cfg Config) *Journal {
	t.Helper()
	j, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestJournalRecordsAJob: a job's records, through a raft replica and
// through a solo log, read back as the job.
func TestJournalRecordsAJob(t *testing.T) {
	for _, solo := range []bool{false, true} {
		t.Run(fmt.Sprintf("solo=%v", solo), func(t *testing.T) { testRecordsAJob(t, solo) })
	}
}

func testRecordsAJob(t *testing.T, solo bool) {
	dir := t.TempDir()
	nodes := []string{"node0", "node1", "node2", "node3"}
	// A solo log is held until Close, as the front-end holds it until the
	// launch is over: without the hold it, open in a millisecond or two,
	// may flush what is queued before every record is made (2 flushes,
	// about 1 run in 10 under -race).
	cfg := Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", Argv: []string{"./app", "-x"}, N: 16}, Solo: solo}
	if solo {
		cfg.Hold = make(chan struct{})
	}
	j := openCfg(t, cfg)
	// Records made before the replica leads wait in the queue.
	launch(j, nodes, 4, 6)
	if err := j.Close(context.Background(), 3, "rank 6 failed"); err != nil {
		t.Fatal(err)
	}
	st := j.Stats()
	if st.Entries > 8 || st.Refused != 0 {
		t.Errorf("stats %+v: want a handful of entries, none refused", st)
	}
	if solo && st.Flushes != 1 {
		t.Errorf("stats %+v: a solo log closed at once writes everything in one flush", st)
	}
	if got, err := Latest(dir); err != nil || got != j.Dir() {
		t.Errorf("Latest = %q, %v; want %q", got, err, j.Dir())
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	s := in.State
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
	if !s.Status.Done || s.Status.ExitCode != 3 || s.Status.Message != "rank 6 failed" {
		t.Errorf("status %+v", s.Status)
	}
	if len(s.Plan.Nodes) != 5 || s.Plan.Nodes[0].Name != RootName || s.Plan.Nodes[1].Primary != RootName {
		t.Errorf("plan %+v", s.Plan)
	}
	if len(s.Agents) != 4 || s.Agents["node2"].Addr != "10.0.0.3:7000" {
		t.Errorf("agents %+v", s.Agents)
	}
	for r, row := range s.Ranks {
		want := raftstore.Rank{Rank: r, Node: nodes[r/4], PID: 1000 + r, Incarnation: 1, State: raftstore.RankExited}
		if r == 6 {
			want.ExitCode = 3
		}
		if string(row.ITuple) != fmt.Sprintf("%s:%d", nodes[r/4], 20000+r) {
			t.Errorf("rank %d: I-tuple %q", r, row.ITuple)
		}
		row.ITuple = nil
		if fmt.Sprint(row) != fmt.Sprint(want) {
			t.Errorf("rank %d: %+v, want %+v", r, row, want)
		}
	}
	rep := Analyze(s)
	if rep.Job.ID != "ft-test" || rep.Job.N != 16 || strings.Join(rep.Job.Argv, " ") != "./app -x" {
		t.Errorf("job %+v", rep.Job)
	}
	if len(rep.Agents) != 4 || rep.Agents[0].Node != "node0" || rep.Agents[0].Level != 1 || rep.Agents[3].SSHUp.IsZero() || rep.Agents[3].Up.IsZero() {
		t.Errorf("agents %+v", rep.Agents)
	}
	if rep.Plan.Kind != TreeFlat || rep.Plan.Root != RootName {
		t.Errorf("plan %+v", rep.Plan)
	}
	var phases []string
	for _, p := range rep.Phases {
		phases = append(phases, p.Name)
	}
	if strings.Join(phases, ",") != "launch agents,start ranks,exchange node table,run" {
		t.Errorf("phases %q", phases)
	}
	if h := rep.Ranks[6].History; len(h) != 2 || h[0].Kind != "exit" || h[1].Kind != "failure" {
		t.Errorf("rank 6 history %+v", h)
	}
	if len(rep.Agents[1].Marks) != 1 || rep.Agents[1].Marks[0].Rank != 6 {
		t.Errorf("node1 marks %+v", rep.Agents[1].Marks)
	}
	if len(rep.Invariants) != 0 {
		t.Errorf("invariants %q", rep.Invariants)
	}
}

// TestJournalSoloPhases: a solo log answers a recovery phase's commit
// once the phase is written (its state machine has it, with the records
// made before it), and the final status goes in Close's flush.
func TestJournalSoloPhases(t *testing.T) {
	dir := t.TempDir()
	j := openCfg(t, Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", N: 8}, Solo: true, Linger: time.Hour})
	launch(j, []string{"node0", "node1"}, 4, 5)
	done := make(chan error, 1)
	j.Commit(RecoveryPhase{Epoch: 1, Stage: "suspend", Rank: 5, Record: raftstore.Recovery{Stage: "suspend"}}, done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var epoch uint64
	var exited int
	j.FSM().View(func(s *raftstore.State) {
		epoch = s.Epoch
		for _, r := range s.Ranks {
			if r.State == raftstore.RankExited {
				exited++
			}
		}
	})
	if epoch != 1 || exited != 8 {
		t.Fatalf("after the phase's commit: recovery epoch %d, %d ranks exited; want 1 and 8", epoch, exited)
	}
	if err := j.Close(context.Background(), 3, "rank 5 failed"); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.State.CheckInvariants(); err != nil {
		t.Error(err)
	}
	if s := in.State; !s.Status.Done || s.Status.ExitCode != 3 || s.Ranks[5].ExitCode != 3 || s.Epoch != 1 || s.Recovery == nil || s.Recovery.Stage != "suspend" {
		t.Errorf("status %+v, rank 5 %+v, epoch %d, recovery %+v", s.Status, s.Ranks[5], s.Epoch, s.Recovery)
	}
	if st := j.Stats(); st.Flushes != 2 || st.Refused != 0 {
		t.Errorf("stats %+v: want the phase's flush and Close's", st)
	}
}

// TestJournalClosedAlone: a replica whose group never formed (its raft
// timers far off: it never leads) writes the job's records and final
// status alone at Close, without waiting for an election; so does one
// still held at Close.
func TestJournalClosedAlone(t *testing.T) {
	slow := raftstore.Timing{HeartbeatTimeout: time.Hour, ElectionTimeout: time.Hour, LeaderLeaseTimeout: time.Hour, CommitTimeout: time.Second}
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprintf("held=%v", held), func(t *testing.T) {
			dir := t.TempDir()
			cfg := Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-test", N: 8}, Timing: slow}
			if held {
				cfg.Hold = make(chan struct{})
			}
			j := openCfg(t, cfg)
			launch(j, []string{"node0", "node1"}, 4, -1)
			if err := j.Close(context.Background(), 0, "success"); err != nil {
				t.Fatal(err)
			}
			if st := j.Stats(); !st.Alone || st.Flushes != 1 {
				t.Errorf("stats %+v: want the log written alone, in one flush", st)
			}
			in, err := raftstore.OpenReadOnly(j.ReplicaDir())
			if err != nil {
				t.Fatal(err)
			}
			if err := in.State.CheckInvariants(); err != nil {
				t.Error(err)
			}
			s := in.State
			if !s.Status.Done || s.Job.ID != "ft-test" || s.Ranks[7].State != raftstore.RankExited {
				t.Errorf("status %+v, job %+v, rank 7 %+v", s.Status, s.Job, s.Ranks[7])
			}
		})
	}
}

// TestJournalBatches: a job of 16,384 ranks on 64 nodes costs a handful
// of entries, each UpdateRanks of at most MaxRows rows.
func TestJournalBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("large job")
	}
	var nodes []string
	for i := range 64 {
		nodes = append(nodes, fmt.Sprintf("n%02d", i))
	}
	j := open(t, t.TempDir(), 64*256)
	launch(j, nodes, 256, -1)
	if err := j.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	// job, plan, agents, 4 started chunks, 4 table chunks, 4 exit chunks,
	// finish: whatever the timing, far below one per node.
	if st := j.Stats(); st.Entries > 24 || st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := in.State.CheckInvariants(); err != nil {
		t.Error(err)
	}
	for _, e := range in.Entries {
		if e.Err != nil {
			t.Errorf("entry %d: %v", e.Index, e.Err)
		}
	}
	for r, row := range in.State.Ranks {
		if row.State != raftstore.RankExited || row.ExitCode != 0 || len(row.ITuple) == 0 {
			t.Fatalf("rank %d: %+v", r, row)
		}
	}
}

// TestJournalDuplicateFailure: a second failure of the same subject is
// kept as a launch event, and nothing is refused.
func TestJournalDuplicateFailure(t *testing.T) {
	j := open(t, t.TempDir(), 2)
	j.Plan(FlatPlan([]string{"a"}))
	j.AgentUp(AgentUp{Node: "a"})
	j.RanksStarted("a", []int{0, 1}, []int{10, 11})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost the agent of node a"})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost it again"})
	j.Failure(Failure{Rank: raftstore.NoRank, Message: "the job exceeded --timeout"})
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(context.Background(), 1, "lost"); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Refused != 0 {
		t.Errorf("stats %+v", st)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range in.State.Events {
		kinds = append(kinds, ev.Kind.String())
	}
	if got := strings.Join(kinds, ","); got != "launch,launch,launch,launch,failure,launch,failure,job-end" {
		t.Errorf("events %s", got)
	}
}

// TestJournalBadRecords: records that name ranks outside the job are
// reported by Err and Close, and the rest is written.
func TestJournalBadRecords(t *testing.T) {
	j := open(t, t.TempDir(), 2)
	j.RanksStarted("a", []int{0, 5}, []int{10, 11})
	j.RankExited(RankExit{Rank: 1})
	err := j.Close(context.Background(), 0, "")
	if err == nil || !strings.Contains(err.Error(), "rank 5 of a job of 2 ranks") {
		t.Fatalf("Close: %v", err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if in.State.Ranks[1].State != raftstore.RankExited || !in.State.Status.Done {
		t.Errorf("state %+v", in.State)
	}
}

// TestJournalLocked: a second journal of the same job cannot open the
// replica's files while the first holds them; its error comes through
// Ready and Close.
func TestJournalLocked(t *testing.T) {
	dir := t.TempDir()
	j1 := open(t, dir, 1)
	if err := j1.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	j2 := open(t, dir, 1)
	if err := j2.Ready(context.Background()); !errors.Is(err, raftstore.ErrLocked) {
		t.Errorf("second journal: %v, want ErrLocked", err)
	}
	j2.RankExited(RankExit{Rank: 0}) // dropped, does not block
	if err := j2.Close(context.Background(), 0, ""); !errors.Is(err, raftstore.ErrLocked) {
		t.Errorf("Close: %v", err)
	}
	if err := j1.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := j1.Close(context.Background(), 0, ""); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := j1.Sync(context.Background()); err == nil {
		t.Error("Sync after Close succeeded")
	}
}

// TestJournalCloseTimeout: Close with an expired context still shuts the
// replica down (its files can be read afterwards).
func TestJournalCloseTimeout(t *testing.T) {
	j := open(t, t.TempDir(), 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = j.Close(ctx, 0, "")
	// The replica may have been stopped before its first write, but it
	// must not still hold its files.
	if _, err := raftstore.OpenReadOnly(j.ReplicaDir()); errors.Is(err, raftstore.ErrLocked) {
		t.Fatal(err)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if d, err := DefaultStateDir(); err != nil || d != "/x/state/ftlaunch/jobs" {
		t.Errorf("%q %v", d, err)
	}
	t.Setenv("XDG_STATE_HOME", "relative")
	t.Setenv("HOME", "/home/u")
	if d, err := DefaultStateDir(); err != nil || d != "/home/u/.local/state/ftlaunch/jobs" {
		t.Errorf("%q %v", d, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, job := range []Job{{ID: "", N: 1}, {ID: "a/b", N: 1}, {ID: LatestLink, N: 1}, {ID: "ok", N: 0}} {
		if _, err := Open(context.Background(), Config{StateDir: dir, Job: job}); err == nil {
			t.Errorf("Open(%+v) succeeded", job)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ok")); err == nil {
		t.Error("a refused Open created the job's directory")
	}
}

// TestJournalAgentIncarnation: a relaunched agent's incarnation reaches
// the replicated state, so that its own later failure (recorded by a
// successor root, whose writer has not seen the first) is not refused as
// its predecessor's again.
func TestJournalAgentIncarnation(t *testing.T) {
	j := open(t, t.TempDir(), 2)
	j.Plan(FlatPlan([]string{"a"}))
	j.AgentUp(AgentUp{Node: "a"})
	j.RanksStarted("a", []int{0, 1}, []int{10, 11})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost the agent of node a"})
	// The recovery's first phase is committed before the relaunch.
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.AgentUp(AgentUp{Node: "a", Incarnation: 2})
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(context.Background(), 0, "done"); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if got := in.State.Agents["a"].Incarnation; got != 2 {
		t.Errorf("agent a is incarnation %d in the state, want 2", got)
	}
}

// TestJournalNodeFailsTwice: an agent started again after its loss and
// lost again is a second failure in the log (its later incarnation), not
// a repeated report of the first.
func TestJournalNodeFailsTwice(t *testing.T) {
	j := open(t, t.TempDir(), 2)
	j.Plan(FlatPlan([]string{"a"}))
	j.AgentUp(AgentUp{Node: "a"})
	j.RanksStarted("a", []int{0, 1}, []int{10, 11})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost the agent of node a"})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost the agent of node a, again"})
	if err := j.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.AgentUp(AgentUp{Node: "a", Incarnation: 2})
	j.Failure(Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost the agent of node a (incarnation 2)"})
	if err := j.Close(context.Background(), 1, "failed"); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	var incs []uint64
	for _, ev := range in.State.Events {
		if ev.Kind == raftstore.EventFailure && ev.Node == "a" {
			incs = append(incs, max(ev.Incarnation, 1))
		}
	}
	if !slices.Equal(incs, []uint64{1, 2}) {
		t.Errorf("node a's failures in the log are of incarnations %v, want [1 2]", incs)
	}
}

// TestWriterSeedsOpenFailures: a successor's writer starts with the
// failures the log has open, so that it reports one again as a launch
// event (which the state machine takes) rather than as a failure (which
// it would refuse, and the batch with it).
func TestWriterSeedsOpenFailures(t *testing.T) {
	w := newWriter(&Journal{cfg: Config{Job: Job{N: 4}}}, nil)
	st := &raftstore.State{
		Ranks:  []raftstore.Rank{{Rank: 0}, {Rank: 1}, {Rank: 2}, {Rank: 3, Incarnation: 2}},
		Agents: map[string]raftstore.Agent{"a": {Incarnation: 2}},
		Events: []raftstore.Event{
			{Kind: raftstore.EventFailure, Rank: raftstore.NoRank, Node: "a", Incarnation: 2},
			{Kind: raftstore.EventFailure, Rank: 3, Incarnation: 1},
			{Kind: raftstore.EventRecovered, Rank: 3, Incarnation: 2},
		},
	}
	w.seed(st)
	w.absorbFailure(time.Now(), &Failure{Node: "a", Rank: raftstore.NoRank, Message: "lost again"})
	w.absorbFailure(time.Now(), &Failure{Rank: 3, Message: "rank 3 failed"})
	if len(w.events) != 2 {
		t.Fatalf("%d events, want 2", len(w.events))
	}
	if k := w.events[0].Kind; k != raftstore.EventLaunch {
		t.Errorf("node a's incarnation 2, open in the log, reported again as %v, want a launch event", k)
	}
	if k := w.events[1].Kind; k != raftstore.EventFailure {
		t.Errorf("rank 3's incarnation 2 (its failure of incarnation 1 recovered) failed as %v, want a failure", k)
	}
}

// TestCloseInBackground: the final status is committed while the caller
// goes on; its wait returns Close's outcome, again when called again.
func TestCloseInBackground(t *testing.T) {
	j := open(t, t.TempDir(), 2)
	wait := j.CloseInBackground(5*time.Second, 4, "rank 1 failed")
	for range 2 {
		if took, err := wait(); err != nil || took <= 0 {
			t.Fatalf("close: %v after %v", err, took)
		}
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	if s := in.State.Status; !s.Done || s.ExitCode != 4 || s.Message != "rank 1 failed" {
		t.Errorf("final status %+v", s)
	}
}
