package journal

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// stateLog builds a job's state by hand: n ranks on nodes (n/len(nodes)
// each), its events at given offsets from the job's start.
type stateLog struct {
	t0 time.Time
	s  *raftstore.State
}

func newStateLog(t *testing.T, n int, nodes ...string) *stateLog {
	t.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := &stateLog{t0: t0, s: &raftstore.State{Job: raftstore.JobSpec{ID: "ft-report", Size: n,
		Spec: encodeJob(Job{ID: "ft-report", N: n, Start: t0, Argv: []string{"./app"}})}}}
	plan := []raftstore.PlanNode{{Name: RootName}}
	for _, node := range nodes {
		plan = append(plan, raftstore.PlanNode{Name: node, Primary: RootName})
	}
	l.s.Plan.Nodes = plan
	per := n / len(nodes)
	for r := range n {
		l.s.Ranks = append(l.s.Ranks, raftstore.Rank{Rank: r, Node: nodes[r/per], PID: 1000 + r, Incarnation: 1, State: raftstore.RankExited})
	}
	l.ev(0, raftstore.EventLaunch, "", raftstore.NoRank, 0, "job: %d ranks: ./app", n)
	return l
}

func (l *stateLog) ev(ms int, kind raftstore.EventKind, node string, rank int, inc uint64, format string, args ...any) {
	l.s.Events = append(l.s.Events, raftstore.Event{Time: l.t0.Add(time.Duration(ms) * time.Millisecond), Kind: kind, Node: node,
		Rank: rank, Incarnation: inc, Detail: fmt.Sprintf(format, args...), Index: uint64(len(l.s.Events) + 1)})
}

// launched records the launch: agents up at 10+i ms, ranks started at
// 20+i ms, the node table at 30 ms.
func (l *stateLog) launched(nodes ...string) {
	per := len(l.s.Ranks) / len(nodes)
	for i, node := range nodes {
		l.ev(10+i, raftstore.EventLaunch, node, raftstore.NoRank, 1, "up: connected back")
	}
	for i, node := range nodes {
		var ranks []int
		for r := i * per; r < (i+1)*per; r++ {
			ranks = append(ranks, r)
		}
		l.ev(20+i, raftstore.EventLaunch, node, raftstore.NoRank, 0, "ranks: %d rank(s) started: %s", per, rankList(ranks))
	}
	l.ev(30, raftstore.EventLaunch, "", raftstore.NoRank, 0, "table: node table of %d ranks published", len(l.s.Ranks))
}

func (l *stateLog) phase(ms int, stage string, epoch uint64, rank int, detail string) {
	l.ev(ms, raftstore.EventRecovery, "", rank, 0, "%s: epoch %d%s", stage, epoch, prefixed(detail))
}

func (l *stateLog) end(ms int, code int) {
	l.ev(ms, raftstore.EventJobEnd, "", raftstore.NoRank, 0, "done")
	l.s.Status = raftstore.Status{Done: true, ExitCode: code}
}

func stages(r Recovery) string {
	var s []string
	for _, p := range r.Phases {
		s = append(s, fmt.Sprintf("%s/%d@%g+%g", p.Stage, p.Epoch, p.OffsetMS, p.DurationMS))
	}
	return strings.Join(s, " ")
}

// TestReportRankRecovery: under --restart rank, a failure is paired with
// its phases (each lasting until the next), the rank's two incarnations
// are told apart, and the respawn's start is no launch milestone.
func TestReportRankRecovery(t *testing.T) {
	nodes := []string{"n0", "n1"}
	l := newStateLog(t, 4, nodes...)
	l.launched(nodes...)
	l.ev(1000, raftstore.EventExit, "n1", 3, 1, "exit: killed by signal 9 (exit code 137)")
	l.ev(1000, raftstore.EventFailure, "n1", 3, 1, "rank 3 on node n1 was killed by signal 9; restarting it as incarnation 2 (restart 1 of 3)")
	l.phase(1001, "suspend", 1, 3, "rank(s) 3")
	l.phase(1020, "respawn", 1, 3, "rank(s) 3")
	l.ev(1030, raftstore.EventLaunch, "n1", raftstore.NoRank, 0, "ranks: 1 rank(s) started: 3")
	l.phase(1050, "patch", 1, 3, "node table version 2: rank(s) 3")
	l.phase(1060, "resume", 1, raftstore.NoRank, "")
	l.ev(1060, raftstore.EventRecovered, "n1", 3, 2, "resume: rank 3 runs as incarnation 2")
	l.phase(1100, "resumed", 1, raftstore.NoRank, "every rank goes on, 100 ms after the failure")
	l.ev(2000, raftstore.EventExit, "n0", raftstore.NoRank, 0, "exit: 2 rank(s) exited with code 0: 0-1")
	l.ev(2001, raftstore.EventExit, "n1", raftstore.NoRank, 0, "exit: 2 rank(s) exited with code 0: 2-3")
	l.end(2002, 0)
	l.s.Ranks[3].Incarnation = 2
	l.s.Epoch, l.s.Recovery = 1, &raftstore.Recovery{Epoch: 1}

	rep := Analyze(l.s)
	// Before, the respawn at +1030 ms ended "start ranks" and left the
	// table's exchange 0 ms.
	if got, want := phaseList(rep), "launch agents@0+11 start ranks@11+10 exchange node table@21+9 run@30+1972"; got != want {
		t.Errorf("phases %s\n want %s", got, want)
	}
	if a := rep.Agents[1]; a.RanksUp != l.t0.Add(21*time.Millisecond) || len(a.RanksRestarted) != 1 || a.Ranks != 2 {
		t.Errorf("agent n1: %+v", a)
	}
	if len(rep.Recoveries) != 1 {
		t.Fatalf("recoveries %+v", rep.Recoveries)
	}
	r := rep.Recoveries[0]
	if got, want := stages(r), "suspend/1@1+19 respawn/1@20+30 patch/1@50+10 resume/1@60+40 resumed/1@100+0"; got != want {
		t.Errorf("phases %s\n want %s", got, want)
	}
	if r.Rank != 3 || r.Node != "n1" || r.Incarnation != 1 || r.NewIncarnation != 2 || r.Outcome != OutcomeResumed || r.TotalMS != 100 ||
		r.EndMS != 1100 || r.RestartedMS != 1030 || !r.Over() {
		t.Errorf("recovery %+v", r)
	}
	incs := rep.Ranks[3].Incarnations
	if len(incs) != 2 || incs[0].Incarnation != 1 || incs[0].StartedMS != 21 || incs[0].EndedMS != 1000 || incs[0].End != "killed by signal 9 (exit code 137)" ||
		incs[0].Shared || !strings.HasPrefix(incs[0].Failure, "rank 3 on node n1") ||
		incs[1].Incarnation != 2 || incs[1].StartedMS != 1030 || incs[1].EndedMS != 2001 || incs[1].End != "exited with code 0" || !incs[1].Shared {
		t.Errorf("rank 3's incarnations %+v", incs)
	}
	if incs := rep.Ranks[0].Incarnations; len(incs) != 1 || incs[0].Node != "n0" || incs[0].EndedMS != 2000 {
		t.Errorf("rank 0's incarnations %+v", incs)
	}
	if rep.RecoveryEpoch != 1 {
		t.Errorf("recovery epoch %d", rep.RecoveryEpoch)
	}
}

// TestReportFailureDuringRecovery: a rank failing while another is being
// recovered starts a new epoch at suspend with both; each failure gets the
// phases that name it, and both end at "resumed".
func TestReportFailureDuringRecovery(t *testing.T) {
	nodes := []string{"n0", "n1"}
	l := newStateLog(t, 4, nodes...)
	l.launched(nodes...)
	l.ev(100, raftstore.EventFailure, "n0", 1, 1, "rank 1 failed")
	l.phase(101, "suspend", 1, 1, "rank(s) 1")
	l.phase(110, "respawn", 1, 1, "rank(s) 1")
	l.ev(115, raftstore.EventFailure, "n1", 2, 1, "rank 2 failed")
	l.phase(116, "suspend", 2, raftstore.NoRank, "rank(s) 1 2")
	l.phase(120, "respawn", 2, raftstore.NoRank, "rank(s) 1 2")
	l.phase(130, "patch", 2, raftstore.NoRank, "node table version 2: rank(s) 1 2")
	l.phase(140, "resume", 2, raftstore.NoRank, "")
	l.ev(140, raftstore.EventRecovered, "n0", 1, 2, "resume: rank 1 runs as incarnation 2")
	l.ev(140, raftstore.EventRecovered, "n1", 2, 2, "resume: rank 2 runs as incarnation 2")
	l.phase(150, "resumed", 2, raftstore.NoRank, "")
	l.end(200, 0)

	rep := Analyze(l.s)
	if len(rep.Recoveries) != 2 {
		t.Fatalf("recoveries %+v", rep.Recoveries)
	}
	r1, r2 := rep.Recoveries[0], rep.Recoveries[1]
	if got, want := stages(r1), "suspend/1@1+9 respawn/1@10+6 suspend/2@16+4 respawn/2@20+10 patch/2@30+10 resume/2@40+10 resumed/2@50+0"; got != want {
		t.Errorf("rank 1: %s\n want %s", got, want)
	}
	if got, want := stages(r2), "suspend/2@1+4 respawn/2@5+10 patch/2@15+10 resume/2@25+10 resumed/2@35+0"; got != want {
		t.Errorf("rank 2: %s\n want %s", got, want)
	}
	if r1.Outcome != OutcomeResumed || r1.TotalMS != 50 || r1.NewIncarnation != 2 || r2.Outcome != OutcomeResumed || r2.TotalMS != 35 {
		t.Errorf("outcomes %+v\n%+v", r1, r2)
	}
}

// TestReportJobRestart: under --restart job every rank starts again (one
// start event per node, no exits for the ranks ended by the restart); a
// second failure of the same rank, which the log keeps as a launch event
// while the first is open for it, is a failure of its own; the job ends
// before recovering it.
func TestReportJobRestart(t *testing.T) {
	nodes := []string{"n0"}
	l := newStateLog(t, 4, nodes...)
	l.launched(nodes...)
	l.ev(300, raftstore.EventExit, "n0", 1, 1, "exit: exited with code 3")
	l.ev(300, raftstore.EventFailure, "n0", 1, 1, "rank 1 on node n0 exited with code 3; restarting the job (restart 1 of 3)")
	l.phase(301, "restart-job", 1, raftstore.NoRank, "restart 1 of the job")
	l.ev(340, raftstore.EventLaunch, "n0", raftstore.NoRank, 0, "ranks: 4 rank(s) started: 0-3")
	l.phase(350, "restarted", 1, raftstore.NoRank, "every rank started again")
	l.ev(700, raftstore.EventExit, "n0", 1, 2, "exit: exited with code 3")
	l.ev(700, raftstore.EventLaunch, "n0", 1, 2, "failure: rank 1 on node n0 exited with code 3; restarting the job (restart 2 of 3)")
	l.phase(701, "restart-job", 2, raftstore.NoRank, "restart 2 of the job")
	l.ev(710, raftstore.EventExit, "n0", raftstore.NoRank, 0, "exit: 3 rank(s) killed by signal 15 (exit code 143): 0,2-3")
	l.end(720, 143)

	rep := Analyze(l.s)
	if got := rep.Phases[1]; got.Name != "start ranks" || got.Duration != 10 {
		t.Errorf("start ranks: %+v", got)
	}
	if len(rep.Recoveries) != 2 {
		t.Fatalf("recoveries %+v", rep.Recoveries)
	}
	r1, r2 := rep.Recoveries[0], rep.Recoveries[1]
	if got, want := stages(r1), "restart-job/1@1+49 restarted/1@50+0"; got != want || r1.Outcome != OutcomeRestarted || r1.NewIncarnation != 2 || r1.RestartedMS != 340 {
		t.Errorf("first: %s (want %s): %+v", got, want, r1)
	}
	if got, want := stages(r2), "restart-job/2@1+19"; got != want || r2.Outcome != OutcomeNotRecovered || r2.Incarnation != 2 || r2.Failure.Kind != "failure" ||
		!strings.HasPrefix(r2.Failure.Detail, "rank 1 on node n0") || !r2.Phases[0].Open || r2.Over() {
		t.Errorf("second: %s (want %s): %+v", got, want, r2)
	}
	for r, rk := range rep.Ranks {
		if len(rk.Incarnations) != 2 || rk.Incarnations[1].StartedMS != 340 {
			t.Errorf("rank %d's incarnations %+v", r, rk.Incarnations)
		}
	}
	if in := rep.Ranks[2].Incarnations[1]; in.End != "killed by signal 15 (exit code 143)" || !in.Shared {
		t.Errorf("rank 2's end %+v", in)
	}
	if in := rep.Ranks[1].Incarnations; in[0].End != "exited with code 3" || in[1].End != "exited with code 3" || !strings.Contains(in[1].Failure, "restart 2 of 3") {
		t.Errorf("rank 1's incarnations %+v", in)
	}
}

// TestReportOpenRecovery: a log that ends during a recovery (the root
// stopped) leaves it in progress; the job's own failure is never
// recovered; a row that lost its node takes the one its start names.
func TestReportOpenRecovery(t *testing.T) {
	nodes := []string{"n0", "n1"}
	l := newStateLog(t, 4, nodes...)
	l.launched(nodes...)
	l.ev(100, raftstore.EventFailure, "n1", 3, 1, "rank 3 failed")
	l.phase(101, "suspend", 1, 3, "rank(s) 3")
	l.phase(120, "respawn", 1, 3, "rank(s) 3")
	l.ev(130, raftstore.EventFailure, "", raftstore.NoRank, 0, "recovery (epoch 1) stopped at its respawn stage")
	l.s.Ranks[2].Node, l.s.Ranks[2].PID = "", 0

	rep := Analyze(l.s)
	if len(rep.Recoveries) != 2 {
		t.Fatalf("recoveries %+v", rep.Recoveries)
	}
	r := rep.Recoveries[0]
	if r.Outcome != OutcomeInProgress || r.Stage() == nil || r.Stage().Stage != "respawn" || !r.Stage().Open || r.Stage().DurationMS != 0 || r.Over() {
		t.Errorf("open recovery %+v", r)
	}
	if j := rep.Recoveries[1]; j.Rank != raftstore.NoRank || j.Node != "" || j.Outcome != OutcomeNotRecovered || len(j.Phases) != 0 {
		t.Errorf("the job's failure %+v", j)
	}
	if rep.Ranks[2].Node != "n1" || rep.Agents[1].Ranks != 2 {
		t.Errorf("rank 2 %+v, agent %+v", rep.Ranks[2], rep.Agents[1])
	}
}

func TestParseRankList(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
	}{
		{"0-3", []int{0, 1, 2, 3}},
		{"6,4", []int{6, 4}},
		{"0,2-3,7", []int{0, 2, 3, 7}},
		{"1,3,...", []int{1, 3}},
		{"5-7,9", []int{5, 6, 7}}, // ranks below n only: it stops at 9
		{"x", nil},
	} {
		if got := parseRankList(c.in, 8); !slices.Equal(got, c.want) {
			t.Errorf("parseRankList(%q, 8) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestReportSpareRelaunch: a node that went silent is replaced by a spare;
// the state's rows then name the spare, yet the phases that name the lost
// node's ranks (it ran them when it failed) are its recovery's.
func TestReportSpareRelaunch(t *testing.T) {
	nodes := []string{"n0", "n1"}
	l := newStateLog(t, 4, nodes...)
	l.launched(nodes...)
	l.ev(5000, raftstore.EventExit, "n1", raftstore.NoRank, 0, "exit: 2 rank(s) lost with its agent (exit code 1): 2-3")
	l.ev(5000, raftstore.EventFailure, "n1", raftstore.NoRank, 1,
		"lost the agent of node n1: heartbeat timeout: peer silent; starting its agent again on spare node n2 as incarnation 2 (restart 1 of 3) and its rank(s) 2, 3 as their next incarnation")
	l.phase(5001, "suspend", 1, raftstore.NoRank, "rank(s) 2 3")
	l.phase(5030, "relaunch", 1, raftstore.NoRank, "the agent of node n2 as incarnation 2; rank(s) 2 3")
	l.ev(5100, raftstore.EventLaunch, "n2", raftstore.NoRank, 2, "up: connected back")
	l.phase(5140, "respawn", 1, raftstore.NoRank, "rank(s) 2 3; fenced: n1 self-fenced")
	l.ev(5150, raftstore.EventLaunch, "n2", raftstore.NoRank, 0, "ranks: 2 rank(s) started: 2-3")
	l.phase(5200, "patch", 1, raftstore.NoRank, "node table version 2: rank(s) 2 3")
	l.phase(5210, "resume", 1, raftstore.NoRank, "")
	l.phase(5220, "resumed", 1, raftstore.NoRank, "every rank goes on, 220 ms after the failure")
	l.end(6000, 0)
	for _, r := range []int{2, 3} {
		l.s.Ranks[r].Node, l.s.Ranks[r].Incarnation = "n2", 2
	}

	rep := Analyze(l.s)
	if len(rep.Recoveries) != 1 {
		t.Fatalf("recoveries %+v", rep.Recoveries)
	}
	r := rep.Recoveries[0]
	if got, want := stages(r), "suspend/1@1+29 relaunch/1@30+110 respawn/1@140+60 patch/1@200+10 resume/1@210+10 resumed/1@220+0"; got != want {
		t.Errorf("phases %s\n want %s", got, want)
	}
	if r.Node != "n1" || r.Outcome != OutcomeResumed || r.TotalMS != 220 {
		t.Errorf("recovery %+v", r)
	}
	// The respawn says how n1's fence was confirmed.
	if got := r.Phases[2].Fenced; len(got) != 1 || got[0] != (FenceNote{Node: "n1", How: "self-fenced"}) {
		t.Errorf("respawn's fences %+v, want n1 self-fenced", got)
	}
}

// TestReportSpare: a node lost and its ranks started on a spare (not in
// the plan) and a node whose agent is started again in place: the spare
// is a child of the root whose first start is its own (not "again", its
// ranks reported one by one), the launch's phases end with the launch
// (the spare's start is no milestone), the lost node is marked lost, and
// the relaunched agent keeps its first launch beside the relaunch.
func TestReportSpare(t *testing.T) {
	nodes := []string{"n0", "n1", "n2"}
	l := newStateLog(t, 6, nodes...)
	l.ev(1, raftstore.EventLaunch, RootName, raftstore.NoRank, 0, "plan: flat tree, 3 nodes below %s", RootName)
	for i, node := range nodes {
		l.ev(5+i, raftstore.EventLaunch, node, raftstore.NoRank, 1, "launch: agent launch began")
	}
	l.launched(nodes...)
	// n1 lost: its ranks 2, 3 on the spare n3.
	l.ev(1000, raftstore.EventFailure, "n1", raftstore.NoRank, 1, "lost the agent of node n1: peer silent; starting its agent again on spare node n3")
	l.ev(1000, raftstore.EventLaunch, RootName, raftstore.NoRank, 0, "plan: changed: lost node(s) n1 start again as children of the root")
	l.phase(1001, "suspend", 1, raftstore.NoRank, "rank(s) 2 3")
	l.phase(1002, "relaunch", 1, raftstore.NoRank, "the agent of node n3 as incarnation 2")
	l.ev(1003, raftstore.EventLaunch, "n3", raftstore.NoRank, 2, "launch: agent launch began")
	l.ev(1010, raftstore.EventLaunch, "n3", raftstore.NoRank, 2, "up: connected back")
	l.phase(1020, "respawn", 1, raftstore.NoRank, "rank(s) 2 3")
	l.ev(1030, raftstore.EventLaunch, "n3", raftstore.NoRank, 0, "ranks: 1 rank(s) started: 2")
	l.ev(1031, raftstore.EventLaunch, "n3", raftstore.NoRank, 0, "ranks: 1 rank(s) started: 3")
	l.phase(1050, "resumed", 1, raftstore.NoRank, "every rank goes on")
	// n2's agent lost and started again in place.
	l.ev(1500, raftstore.EventFailure, "n2", raftstore.NoRank, 1, "lost the agent of node n2: its link was closed")
	l.phase(1501, "relaunch", 2, raftstore.NoRank, "the agent of node n2 as incarnation 2")
	l.ev(1502, raftstore.EventLaunch, "n2", raftstore.NoRank, 2, "launch: agent launch began")
	l.ev(1510, raftstore.EventLaunch, "n2", raftstore.NoRank, 2, "up: connected back")
	l.phase(1520, "respawn", 2, raftstore.NoRank, "rank(s) 4 5")
	l.ev(1530, raftstore.EventLaunch, "n2", raftstore.NoRank, 0, "ranks: 2 rank(s) started: 4-5")
	l.end(2000, 0)
	l.s.Ranks[2].Node, l.s.Ranks[3].Node = "n3", "n3"

	rep := Analyze(l.s)
	if got, want := phaseList(rep), "launch agents@0+12 start ranks@12+10 exchange node table@22+8 run@30+1970"; got != want {
		t.Errorf("phases %s\n want %s", got, want)
	}
	agents := map[string]AgentTimeline{}
	for _, a := range rep.Agents {
		agents[a.Node] = a
	}
	if a := agents["n3"]; a.Primary != RootName || a.Level != 1 || a.RanksUp != l.t0.Add(1030*time.Millisecond) || len(a.RanksRestarted) != 0 || a.Ranks != 2 || a.Lost {
		t.Errorf("spare n3: %+v", a)
	}
	if a := agents["n1"]; !a.Lost || a.Ranks != 0 {
		t.Errorf("lost n1: %+v", a)
	}
	if rep.Plan.Kind != TreeFlat {
		t.Errorf("plan kind %q after the plan's change, want %q", rep.Plan.Kind, TreeFlat)
	}
	if n := rep.Nodes(); n != 3 {
		t.Errorf("the job is on %d node(s), want 3 (n1's place taken by n3)", n)
	}
	a := agents["n2"]
	if a.Lost || a.Launch != l.t0.Add(7*time.Millisecond) || !slices.Equal(a.Relaunched, []time.Time{l.t0.Add(1502 * time.Millisecond)}) ||
		a.Up != l.t0.Add(12*time.Millisecond) || len(a.RanksRestarted) != 1 {
		t.Errorf("relaunched n2: %+v", a)
	}
}

// phaseList says a report's phases: name@start+duration, in ms.
func phaseList(rep *Report) string {
	var phases []string
	for _, p := range rep.Phases {
		phases = append(phases, fmt.Sprintf("%s@%g+%g", p.Name, p.StartMS, p.Duration))
	}
	return strings.Join(phases, " ")
}
