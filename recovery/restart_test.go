package recovery

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// world is a small job that carries out the planner's actions the way
// agents would, with an adversary that orders the events they produce,
// delivers some twice, kills ranks, and changes the root's leader. It
// checks the protocol's promises as it goes.
type world struct {
	t      *testing.T
	cfg    Config
	p      *Planner
	rng    *rand.Rand
	events []Event // produced, not yet delivered
	done   []Event // delivered (for duplicates)

	actual    []uint64           // incarnation running, by rank
	starts    map[[2]uint64]int  // (rank, incarnation) → processes started
	table     []uint64           // incarnation each rank's row names, as the agents hold it
	version   uint64             // table version the agents hold
	committed map[[2]uint64]bool // (epoch, stage) committed
	last      Checkpoint         // the last committed checkpoint (the FSM's)
	fsmInc    []uint64           // incarnations as the FSM's node table has them
	fsmRes    []int              // restarts as the FSM has them
	maxEpoch  uint64             // highest epoch in a command
	failures  int                // failures injected
	ended     bool               // the planner ended the job
	log       []string           // what happened, for a failing test
	suspended bool               // ranks are suspended (between Suspend and Resume)
	resumes   int                // Resume actions seen
	cmdEpochs map[string]uint64  // per command kind, the last epoch sent

	agentInc    []uint64          // incarnation of each agent's process
	agentUp     []bool            // its process runs
	agentStarts map[[2]uint64]int // (agent, incarnation) → processes started
	// zombies[r] are the incarnations of rank r's agent that were lost
	// while they ran it and whose fence the planner was not told of
	// (FenceDone): the rank's older incarnation may still run there (a
	// stopped agent kills nothing), so no newer one may start.
	zombies [][]uint64
	lost    [][2]uint64 // (agent, incarnation) lost, every one

	plain bool // a plain program under policy Rank: ranks start again alone
	overs int  // recoveries that started ranks alone, over (AloneOver)
	// recovered counts the recoveries over (RecoveryOver); lastSent is
	// the epoch of the last Resume or RestartJob.
	recovered int
	lastSent  uint64
	// named are the (rank, incarnation) pairs the records of this
	// leader's planner named as started again: each once.
	named map[[2]uint64]bool

	// For the node-loss world (nodeworld_test.go): closed is the root's
	// view of each agent's link (declared lost); resolve turns an event
	// the adversary holds into the one the root steps when it delivers
	// it (with the links as they stand then); nodeAct carries out the
	// node-loss actions; check verifies the invariants after each step
	// (monotonic).
	closed  []bool
	resolve func(Event) (Event, bool)
	nodeAct func(Action) bool
	check   func()
}

// rootLinks is how every agent's link stands as the root knows it, for a
// new leader's planner (its adoptions, in short): in the node-loss world,
// closed once declared lost (a process that died unnoticed still looks
// up), every agent told the root is its last fallback parent; else closed
// once its process is gone. The planner keeps them from then on, as the
// root tells it (AgentUp when an agent started again comes up, its own
// losses).
func (w *world) rootLinks() []AgentLink {
	out := make([]AgentLink, len(w.agentUp))
	for a, up := range w.agentUp {
		if w.closed != nil {
			out[a] = AgentLink{Up: !w.closed[a], Closed: w.closed[a], Inc: w.agentInc[a], Fallbacks: []int{topology.Root}}
			continue
		}
		out[a] = AgentLink{Up: up, Closed: !up, Inc: w.agentInc[a]}
	}
	return out
}

// linkUp tells the planner agent a's new incarnation is up, as the root
// does once it gave it its share (and, in the node-loss world, that it
// was told the root is its last fallback).
func (w *world) linkUp(a int) {
	w.p.Step(AgentUp{Agent: a})
	if w.closed != nil {
		w.p.Step(FallbacksTold{Agent: a, Parents: []int{topology.Root}})
	}
}

func newWorld(t *testing.T, seed uint64, policy Policy, ranks, agents, maxRestarts int) *world {
	cfg := Config{Policy: policy, Ranks: ranks, Agents: agents, MaxRestarts: maxRestarts, AckTimeout: time.Second, TableReady: true, Up: allUp(agents)}
	for r := range ranks {
		cfg.RankAgent = append(cfg.RankAgent, r%agents)
	}
	return newWorldConfig(t, seed, cfg)
}

// newWorldConfig is newWorld for a planner of cfg (ranks dealt to agents
// by cfg.RankAgent). Without TableReady under policy Rank it is a job of
// a plain program, whose ranks are started again alone: nothing may be
// suspended or patched.
func newWorldConfig(t *testing.T, seed uint64, cfg Config) *world {
	ranks, agents := cfg.Ranks, cfg.Agents
	w := &world{
		t: t, cfg: cfg, p: New(cfg), rng: rand.New(rand.NewPCG(seed, 7)),
		starts: map[[2]uint64]int{}, committed: map[[2]uint64]bool{}, cmdEpochs: map[string]uint64{},
		version: 1, agentStarts: map[[2]uint64]int{}, named: map[[2]uint64]bool{},
	}
	for range agents {
		w.agentInc, w.agentUp = append(w.agentInc, 1), append(w.agentUp, true)
	}
	w.zombies = make([][]uint64, ranks)
	w.plain = cfg.Policy == Rank && !cfg.TableReady
	for r := range ranks {
		w.actual = append(w.actual, 1)
		w.table = append(w.table, 1)
		w.fsmInc = append(w.fsmInc, 1)
		w.fsmRes = append(w.fsmRes, 0)
		w.starts[[2]uint64{uint64(r), 1}] = 1
	}
	w.check = w.monotonic()
	return w
}

func (w *world) fatalf(format string, args ...any) {
	w.t.Helper()
	w.t.Fatalf(format+"\nhistory:\n  %s", append(args, strings.Join(w.log, "\n  "))...)
}

// step gives the planner an event and carries out its actions.
func (w *world) step(ev Event) {
	w.t.Helper()
	if w.resolve != nil {
		var ok bool
		if ev, ok = w.resolve(ev); !ok {
			return
		}
	}
	w.log = append(w.log, fmt.Sprintf("event %#v", ev))
	if st, ok := ev.(RankStarted); ok {
		// The root records a start in the state log's table as it hears
		// of it.
		w.fsmInc[st.Rank] = max(w.fsmInc[st.Rank], st.Incarnation)
	}
	if f, ok := ev.(FenceDone); ok {
		// The fence ended as the root tells it.
		for r := range w.zombies {
			if w.cfg.RankAgent[r] == f.Agent {
				w.zombies[r] = slices.DeleteFunc(w.zombies[r], func(inc uint64) bool { return inc <= f.Incarnation })
			}
		}
	}
	for _, act := range w.p.Step(ev) {
		w.act(act)
	}
	if w.check != nil {
		w.check()
	}
}

func (w *world) command(kind string, epoch uint64, stage Stage) {
	w.t.Helper()
	if !w.committed[[2]uint64{epoch, uint64(stage)}] {
		w.fatalf("%s of epoch %d sent before its stage %v was committed", kind, epoch, stage)
	}
	if epoch < w.cmdEpochs[kind] {
		w.fatalf("%s of epoch %d after one of epoch %d", kind, epoch, w.cmdEpochs[kind])
	}
	w.cmdEpochs[kind] = epoch
	w.maxEpoch = max(w.maxEpoch, epoch)
}

func (w *world) act(act Action) {
	w.t.Helper()
	w.log = append(w.log, fmt.Sprintf("  action %#v", act))
	for _, ri := range recoveredIn([]Action{act}) {
		k := [2]uint64{uint64(ri.Rank), ri.Incarnation}
		if w.named[k] {
			w.fatalf("rank %d named as started again as incarnation %d twice", ri.Rank, ri.Incarnation)
		}
		w.named[k] = true
	}
	switch a := act.(type) {
	case Commit:
		if a.Rec.Epoch < w.last.Epoch {
			w.fatalf("commit of epoch %d after epoch %d", a.Rec.Epoch, w.last.Epoch)
		}
		w.last = a.Rec
		for _, rr := range a.Rec.Ranks {
			w.fsmInc[rr.Rank], w.fsmRes[rr.Rank] = rr.Incarnation, rr.Restarts
		}
		if a.Rec.Stage == StageRestartJob {
			for r := range w.fsmInc {
				w.fsmInc[r] = uint64(a.Rec.Restarts) + 1
			}
		}
		w.committed[[2]uint64{a.Rec.Epoch, uint64(a.Rec.Stage)}] = true
		w.events = append(w.events, Committed{Epoch: a.Rec.Epoch, Stage: a.Rec.Stage})
	case Suspend:
		if w.plain {
			w.fatalf("a plain program's ranks suspended")
		}
		w.command("suspend", a.Epoch, StageSuspend)
		w.suspended = true
		for ag := range w.cfg.Agents {
			if w.agentUp[ag] {
				w.events = append(w.events, Suspended{Agent: ag, Epoch: a.Epoch})
			}
		}
	case Respawn:
		w.command("respawn", a.Epoch, StageRespawn)
		r := uint64(a.Rank)
		if a.Incarnation < 2 {
			w.fatalf("respawn of rank %d as incarnation %d", a.Rank, a.Incarnation)
		}
		if !w.agentUp[a.Agent] {
			break // lost: the root hears nothing of it
		}
		// An agent starts an incarnation once; a command sent again
		// (a new leader) is answered with what runs.
		if w.actual[a.Rank] < a.Incarnation {
			w.started(a.Rank, a.Incarnation)
			w.actual[a.Rank] = a.Incarnation
			w.starts[[2]uint64{r, a.Incarnation}]++
		}
		switch {
		case w.actual[a.Rank] == a.Incarnation && w.plain:
			// It never publishes: its agent says it started.
			w.events = append(w.events, RankStarted{Rank: a.Rank, Incarnation: a.Incarnation})
		case w.actual[a.Rank] == a.Incarnation:
			w.events = append(w.events, Respawned{Rank: a.Rank, Incarnation: a.Incarnation, Addr: []byte(fmt.Sprintf("h:%d.%d", a.Rank, a.Incarnation))})
		}
	case Patch:
		if w.plain {
			w.fatalf("a plain program's table patched")
		}
		w.command("patch", a.Epoch, StagePatch)
		if a.Version <= w.version && a.Version != w.version {
			w.fatalf("patch to version %d while the agents hold %d", a.Version, w.version)
		}
		for _, row := range a.Rows {
			if row.Incarnation > w.table[row.Rank] {
				w.table[row.Rank] = row.Incarnation
			}
		}
		w.version = max(w.version, a.Version)
		for ag := range w.cfg.Agents {
			if w.agentUp[ag] {
				w.events = append(w.events, Patched{Agent: ag, Epoch: a.Epoch, Version: a.Version})
			}
		}
	case Resume:
		if w.plain {
			w.fatalf("a plain program's ranks resumed")
		}
		w.command("resume", a.Epoch, StageResume)
		for r := range w.actual {
			if w.table[r] != w.actual[r] {
				w.fatalf("resume while rank %d runs incarnation %d and the table names %d", r, w.actual[r], w.table[r])
			}
		}
		w.suspended = false
		w.resumes++
		w.lastSent = a.Epoch
		for ag := range w.cfg.Agents {
			if w.agentUp[ag] {
				w.events = append(w.events, Resumed{Agent: ag, Epoch: a.Epoch})
			}
		}
	case RestartJob:
		w.command("restart", a.Epoch, StageRestartJob)
		for r := range w.actual {
			if !w.agentUp[w.cfg.RankAgent[r]] {
				continue // lost: its agent starts nothing
			}
			if inc := uint64(a.Restarts) + 1; w.actual[r] < inc {
				w.started(r, inc)
				w.actual[r] = inc
				w.starts[[2]uint64{uint64(r), inc}]++
				w.table[r] = inc
			}
		}
		for ag := range w.cfg.Agents {
			if w.agentUp[ag] {
				w.events = append(w.events, Restarted{Agent: ag, Epoch: a.Epoch})
			}
		}
		w.lastSent = a.Epoch
	case Relaunch:
		w.command("relaunch", a.Epoch, StageRelaunch)
		if a.Incarnation < 2 {
			w.fatalf("relaunch of agent %d as incarnation %d", a.Agent, a.Incarnation)
		}
		// The root starts an incarnation once; a command sent again is
		// answered with what runs.
		if w.agentInc[a.Agent] < a.Incarnation {
			if w.agentUp[a.Agent] {
				w.fatalf("relaunch of agent %d as incarnation %d while incarnation %d runs", a.Agent, a.Incarnation, w.agentInc[a.Agent])
			}
			w.agentInc[a.Agent], w.agentUp[a.Agent] = a.Incarnation, true
			if w.closed != nil {
				w.closed[a.Agent] = false // a new link
			}
			w.linkUp(a.Agent)
			w.agentStarts[[2]uint64{uint64(a.Agent), a.Incarnation}]++
		}
		if w.agentInc[a.Agent] == a.Incarnation && w.agentUp[a.Agent] {
			w.events = append(w.events, Relaunched{Agent: a.Agent, Incarnation: a.Incarnation})
		}
	case AloneOver:
		w.command("over", a.Epoch, StageRespawn)
		for _, r := range a.Ranks {
			if w.actual[r] != w.p.Incarnation(r) {
				w.fatalf("rank %d's recovery over while it runs incarnation %d, not %d", r, w.actual[r], w.p.Incarnation(r))
			}
		}
		w.overs++
	case Fence:
		// A new leader's fence: it ends, and the root tells the planner.
		w.events = append(w.events, FenceDone{Agent: a.Agent, Node: a.Node, Incarnation: a.Incarnation})
	case RecoveryOver:
		// Over once every live agent acknowledged the last phase sent,
		// of that epoch, and never twice for one.
		if a.Epoch != w.lastSent || a.Record.Stage != 0 || a.Record.Epoch != a.Epoch {
			w.fatalf("recovery of epoch %d over (record %+v) after the last phase of epoch %d", a.Epoch, a.Record, w.lastSent)
		}
		w.lastSent = 0
		w.recovered++
	case Arm:
	case Record, Report:
	case Terminate:
		w.ended = true
	default:
		if w.nodeAct == nil || !w.nodeAct(act) {
			w.fatalf("unknown action %T", act)
		}
	}
}

// kill fails rank r's running incarnation, as its agent reports it.
func (w *world) kill(r int) {
	w.failures++
	w.events = append(w.events, RankExited{Rank: r, Incarnation: w.actual[r], Node: "n", Signal: 9})
}

// exit ends rank r's running incarnation with code, as its agent reports
// it.
func (w *world) exit(r, code int) {
	w.failures++
	w.events = append(w.events, RankExited{Rank: r, Incarnation: w.actual[r], Node: "n", Code: code})
}

// loseTogether loses agents as.. at once: the root reports them in one
// turn (an interior agent and those below it that could not move).
func (w *world) loseTogether(as ...int) {
	n := len(w.events)
	for _, a := range as {
		w.loseAgent(a)
	}
	var losses []Event
	for i := n; i < len(w.events); i++ {
		if l, ok := w.events[i].(AgentLost); ok {
			losses = append(losses, l)
		}
	}
	w.events = slices.DeleteFunc(w.events, func(ev Event) bool { _, ok := ev.(AgentLost); return ok && slices.Contains(losses, ev) })
	for _, l := range losses {
		w.done = append(w.done, l)
		w.step(l)
	}
}

// loseSilent is loseAgent for an agent whose node went silent: it starts
// again elsewhere (a spare, a survivor's slots).
func (w *world) loseSilent(a int) {
	if !w.agentUp[a] {
		return
	}
	w.loseAgent(a)
	l := &w.events[len(w.events)-2]
	lost := (*l).(AgentLost)
	lost.Silent, lost.Err = true, "heartbeat timeout"
	*l = lost
}

// loseAgent kills agent a's process, and with it its ranks: the root
// reports the loss (and, for the ranks, nothing more).
func (w *world) loseAgent(a int) {
	if !w.agentUp[a] {
		return
	}
	w.failures++
	w.agentUp[a] = false
	w.lost = append(w.lost, [2]uint64{uint64(a), w.agentInc[a]})
	for r := range w.zombies {
		if w.cfg.RankAgent[r] == a {
			w.zombies[r] = append(w.zombies[r], w.agentInc[a])
		}
	}
	// The root fences what it declares lost, and tells the planner once
	// the fence ended: before or after the loss, in any order.
	w.events = append(w.events, AgentLost{Agent: a, Incarnation: w.agentInc[a], Node: fmt.Sprintf("n%d", a), Err: "EOF"},
		FenceDone{Agent: a, Node: fmt.Sprintf("n%d", a), Incarnation: w.agentInc[a]})
}

// leaderChange replaces the planner by a new leader's, rebuilt from what
// was committed.
func (w *world) leaderChange() {
	cfg := w.cfg
	cfg.Resumed = true
	cfg.Incarnations = slices.Clone(w.fsmInc)
	cfg.RankRestarts = slices.Clone(w.fsmRes)
	w.p = New(cfg)
	w.p.Restore(w.last)
	w.p.haveLinks(w.rootLinks())
	// A new leader names again what the recovery it carries on starts:
	// its predecessor's record of it may not have been committed.
	clear(w.named)
	// The new root fences every agent it learns was lost (the losses in
	// flight reach it too): a confirmation the old leader took with it is
	// given again.
	for _, l := range w.lost {
		w.events = append(w.events, FenceDone{Agent: int(l[0]), Node: fmt.Sprintf("n%d", l[0]), Incarnation: l[1]})
	}
	w.log = append(w.log, fmt.Sprintf("leader change; restored %+v", w.last))
	w.step(LeaderChanged{})
}

// deliver hands the planner one pending event, picked by the adversary;
// sometimes one delivered before, again.
func (w *world) deliver() bool {
	if len(w.events) == 0 {
		return false
	}
	if len(w.done) > 0 && w.rng.IntN(8) == 0 {
		w.step(w.done[w.rng.IntN(len(w.done))])
		return true
	}
	i := w.rng.IntN(len(w.events))
	ev := w.events[i]
	w.events = slices.Delete(w.events, i, i+1)
	w.done = append(w.done, ev)
	w.step(ev)
	return true
}

// settle delivers every pending event.
func (w *world) settle() {
	for n := 0; w.deliver(); n++ {
		if n > 10000 {
			w.fatalf("no end to the events")
		}
	}
}

// checkEnd verifies the state once no event is left.
func (w *world) checkEnd(wantRecovered bool) {
	w.t.Helper()
	if !wantRecovered {
		return
	}
	if w.p.Phase() != Running {
		w.fatalf("phase %v at the end, stage %v", w.p.Phase(), w.p.Stage())
	}
	for r := range w.actual {
		if w.plain {
			w.table[r] = w.actual[r] // no table
		}
		if w.p.Incarnation(r) != w.actual[r] || w.table[r] != w.actual[r] {
			w.fatalf("rank %d: planner says incarnation %d, runs %d, table names %d", r, w.p.Incarnation(r), w.actual[r], w.table[r])
		}
	}
	for k, n := range w.starts {
		if n != 1 {
			w.fatalf("rank %d incarnation %d started %d times", k[0], k[1], n)
		}
	}
	for k, n := range w.agentStarts {
		if n != 1 {
			w.fatalf("agent %d incarnation %d started %d times", k[0], k[1], n)
		}
	}
	for a := range w.agentUp {
		if !w.agentUp[a] || w.p.AgentIncarnation(a) != w.agentInc[a] {
			w.fatalf("agent %d: up %v, incarnation %d, planner says %d", a, w.agentUp[a], w.agentInc[a], w.p.AgentIncarnation(a))
		}
	}
	if w.suspended {
		w.fatalf("ranks left suspended")
	}
	for r, incs := range w.zombies {
		if len(incs) > 0 {
			w.fatalf("rank %d: its agent's lost incarnation(s) %v never fenced", r, incs)
		}
	}
}

// started checks that rank r's incarnation inc may start: no older one
// may still run on a lost agent that was not fenced.
func (w *world) started(r int, inc uint64) {
	w.t.Helper()
	if len(w.zombies[r]) > 0 {
		w.fatalf("rank %d started as incarnation %d while its agent's lost incarnation(s) %v, which may still run it, are not fenced", r, inc, w.zombies[r])
	}
}

func TestRestartOneRank(t *testing.T) {
	w := newWorld(t, 1, Rank, 4, 2, 3)
	w.kill(2)
	w.settle()
	w.checkEnd(true)
	if w.p.Incarnation(2) != 2 || w.p.Version() != 2 || w.resumes != 1 {
		t.Fatalf("incarnation %d, version %d, resumes %d", w.p.Incarnation(2), w.p.Version(), w.resumes)
	}
}

func TestRestartOrderOfActions(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 2, Agents: 1, RankAgent: []int{0, 0}, MaxRestarts: 1, AckTimeout: time.Second, TableReady: true})
	kinds := func(acts []Action) string {
		var s []string
		for _, a := range acts {
			s = append(s, strings.TrimPrefix(fmt.Sprintf("%T", a), "recovery."))
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{RankExited{Rank: 1, Incarnation: 1, Node: "n0", Code: 3}, "Record,Report,Commit"},
		{Suspended{Agent: 0, Epoch: 1}, ""}, // not committed yet: too early
		{Committed{Epoch: 1, Stage: StageSuspend}, "Suspend,Arm"},
		{Committed{Epoch: 1, Stage: StageSuspend}, ""},
		{Suspended{Agent: 0, Epoch: 1}, "Commit"},
		{Committed{Epoch: 1, Stage: StageRespawn}, "Respawn,Arm"},
		{Respawned{Rank: 1, Incarnation: 1}, ""}, // the old incarnation
		{Respawned{Rank: 1, Incarnation: 2, Addr: []byte("a")}, "Commit"},
		{Committed{Epoch: 1, Stage: StagePatch}, "Patch,Arm"},
		{Patched{Agent: 0, Epoch: 1, Version: 1}, ""}, // the old version
		{Patched{Agent: 0, Epoch: 1, Version: 2}, "Commit"},
		{Committed{Epoch: 1, Stage: StageResume}, "Resume"},
		{RankExited{Rank: 1, Incarnation: 1, Node: "n0", Code: 3}, ""}, // stale
		{RankExited{Rank: 1, Incarnation: 2, Node: "n0", Code: 4}, "Record,Report,Terminate"},
	} {
		if got := kinds(p.Step(tc.ev)); got != tc.want {
			t.Fatalf("Step(%#v) = %s, want %s (phase %v stage %v)", tc.ev, got, tc.want, p.Phase(), p.Stage())
		}
	}
	if f := p.Failure(); f == nil || f.Code != 4 || !reflect.DeepEqual(f.Why, Reason{Kind: ReasonRestartLimit, Rank: 1, Node: "n0", Text: "exited with code 4", Restarts: 1, Max: 1,
		History: []Ended{{Incarnation: 1, How: "exited with code 3"}, {Incarnation: 2, How: "exited with code 4"}}}) {
		t.Fatalf("failure %+v", f)
	}
}

// TestRestartSecondFailureAnywhere kills a second rank (or the same one
// again) before every event of a recovery, and changes the leader before
// every event: the job always recovers, every incarnation starts once.
func TestRestartSecondFailureAnywhere(t *testing.T) {
	for _, fault := range []string{"other", "same", "leader", "leader+other"} {
		for k := 0; k < 40; k++ {
			for seed := range uint64(5) {
				w := newWorld(t, seed, Rank, 3, 2, 5)
				w.kill(0)
				for i := 0; w.deliver(); i++ {
					if i != k {
						continue
					}
					switch fault {
					case "other":
						w.kill(1)
					case "same":
						w.kill(0)
					case "leader":
						w.leaderChange()
					case "leader+other":
						w.leaderChange()
						w.kill(2)
					}
				}
				w.checkEnd(true)
			}
		}
	}
}

// TestRestartRandom explores random interleavings of failures, duplicate
// and stale evidence and leader changes on small jobs.
func TestRestartRandom(t *testing.T) {
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 99))
		ranks, agents := 1+rng.IntN(4), 1+rng.IntN(3)
		w := newWorld(t, seed, Rank, ranks, agents, 100)
		faults := 1 + rng.IntN(4)
		for step := 0; faults > 0 || len(w.events) > 0; step++ {
			if step > 20000 {
				w.fatalf("seed %d: no end", seed)
			}
			switch x := rng.IntN(10); {
			case faults > 0 && x == 0:
				w.kill(rng.IntN(ranks))
				faults--
			case faults > 0 && x == 1:
				w.leaderChange()
				faults--
			case x == 2 && len(w.done) > 0:
				// Stale evidence: an end of an incarnation that was replaced.
				r := rng.IntN(ranks)
				if w.actual[r] > 1 {
					w.step(RankExited{Rank: r, Incarnation: w.actual[r] - 1, Node: "n", Code: 1})
				}
			default:
				if !w.deliver() && faults > 0 {
					w.kill(rng.IntN(ranks))
					faults--
				}
			}
		}
		w.checkEnd(true)
	}
}

func TestRestartMaxRestarts(t *testing.T) {
	w := newWorld(t, 3, Rank, 2, 1, 2)
	for range 3 {
		w.kill(1)
		w.settle()
	}
	f := w.p.Failure()
	if f == nil || w.p.Phase() != Ending || !w.ended || f.Code != 137 ||
		f.Why.Kind != ReasonRestartLimit || f.Why.JobWide || f.Why.Rank != 1 || f.Why.Restarts != 2 || f.Why.Max != 2 || len(f.Why.History) != 3 ||
		f.Why.History[0] != (Ended{Incarnation: 1, How: "was killed by signal 9 (killed)"}) {
		t.Fatalf("phase %v, failure %+v", w.p.Phase(), f)
	}
}

func TestRestartDroppedWhenTheJobEnds(t *testing.T) {
	w := newWorld(t, 4, Rank, 2, 2, 3)
	w.kill(0)
	w.deliver() // the exit: suspend committed next
	w.step(TimedOut{Limit: time.Minute})
	if w.p.Phase() != Ending || w.p.Stage() != 0 || !w.ended {
		t.Fatalf("phase %v stage %v", w.p.Phase(), w.p.Stage())
	}
	n := len(w.log)
	w.settle() // what was in flight changes nothing
	for _, l := range w.log[n:] {
		if strings.HasPrefix(l, "  action") {
			t.Fatalf("an action after the job ended: %s", l)
		}
	}
	w.kill(1)
	w.settle()
	if w.p.Failure().Code != ExitTimeout {
		t.Fatalf("failure %+v", w.p.Failure())
	}
}

func TestRestartExpired(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: 2 * time.Second, TableReady: true})
	p.Step(RankExited{Rank: 0, Incarnation: 1, Node: "n0", Code: 1})
	p.Step(Committed{Epoch: 1, Stage: StageSuspend})
	p.Step(Suspended{Agent: 0, Epoch: 1})
	if acts := p.Step(Expired{Epoch: 0, Stage: StageSuspend}); acts != nil {
		t.Fatalf("an old bound expired: %v", acts)
	}
	acts := p.Step(Expired{Epoch: 1, Stage: StageSuspend})
	if len(acts) != 3 || p.Failure() == nil || !reflect.DeepEqual(p.Failure().Why, Reason{Kind: ReasonExpired, Rank: NoRank, Epoch: 1, Stage: StageSuspend,
		Limit: 2 * time.Second, Awaited: []Awaited{{Rank: NoRank, Agent: 1}}}) {
		t.Fatalf("acts %v failure %+v", acts, p.Failure())
	}
}

func TestRestartJob(t *testing.T) {
	w := newWorld(t, 5, Job, 3, 2, 1)
	w.kill(1)
	w.settle()
	w.checkEnd(true)
	for r := range 3 {
		if w.p.Incarnation(r) != 2 {
			t.Fatalf("rank %d incarnation %d", r, w.p.Incarnation(r))
		}
	}
	// Ends of the first incarnation (killed by the restart) are stale.
	w.step(RankExited{Rank: 0, Incarnation: 1, Node: "n", Signal: 9})
	if w.p.Failure() != nil {
		t.Fatalf("stale end failed the job: %+v", w.p.Failure())
	}
	w.kill(2)
	w.settle()
	if f := w.p.Failure(); f == nil || f.Why.Kind != ReasonRestartLimit || !f.Why.JobWide || f.Why.Restarts != 1 || f.Why.Max != 1 {
		t.Fatalf("failure %+v", f)
	}
}

func TestRestartJobLeaderChange(t *testing.T) {
	for k := range 6 {
		w := newWorld(t, uint64(k), Job, 2, 2, 3)
		w.kill(0)
		for i := 0; w.deliver(); i++ {
			if i == k {
				w.leaderChange()
			}
		}
		w.checkEnd(true)
	}
}

func TestPMIUnderRank(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 2})
	acts := p.Step(PMIInit{Rank: 1, Node: "n0"})
	if len(acts) != 3 || p.Failure().Code != ExitUsage || !reflect.DeepEqual(p.Failure().Why, Reason{Kind: ReasonPMIUnderRank, Rank: 1, Node: "n0"}) {
		t.Fatalf("acts %v failure %+v", acts, p.Failure())
	}
	if acts := New(Config{Policy: Job, Ranks: 2}).Step(PMIInit{Rank: 1, Node: "n0"}); acts != nil {
		t.Fatalf("PMI under job: %v", acts)
	}
}

func TestParsePolicy(t *testing.T) {
	for s, want := range map[string]Policy{"none": None, "rank": Rank, "job": Job} {
		if p, err := ParsePolicy(s); err != nil || p != want || p.String() != s {
			t.Fatalf("%s: %v %v", s, p, err)
		}
	}
	if _, err := ParsePolicy("node"); err == nil {
		t.Fatal("no error")
	}
}

// TestPolicyRecord: the job's record keeps no policy for None, each other's
// name, and ParsePolicy reads each back.
func TestPolicyRecord(t *testing.T) {
	for p, want := range map[Policy]string{None: "", Rank: "rank", Job: "job"} {
		if got := p.Record(); got != want {
			t.Errorf("%v recorded as %q, want %q", p, got, want)
		}
		if back, err := ParsePolicy(p.Record()); err != nil || back != p {
			t.Errorf("%v read back as %v, %v", p, back, err)
		}
	}
}

// TestSettledRecord: the record of a recovery carried out to its end
// keeps the agents started again (node, incarnation): a new leader's
// planner restored from it knows them and carries nothing on.
func TestSettledRecord(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true,
		Spares: []string{"spare0"}})
	for _, ev := range []Event{
		AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "heartbeat", Silent: true}, FenceDone{Agent: 1, Node: "n1", Incarnation: 1},
		Committed{Epoch: 1, Stage: StageSuspend}, Suspended{Agent: 0, Epoch: 1},
		Committed{Epoch: 1, Stage: StageRelaunch}, Relaunched{Agent: 1, Incarnation: 2},
		Committed{Epoch: 1, Stage: StageRespawn},
		Respawned{Rank: 2, Incarnation: 2, Addr: []byte("a2")}, Respawned{Rank: 3, Incarnation: 2, Addr: []byte("a3")},
		Committed{Epoch: 1, Stage: StagePatch}, Patched{Agent: 0, Epoch: 1, Version: 2}, Patched{Agent: 1, Epoch: 1, Version: 2},
		Committed{Epoch: 1, Stage: StageResume},
	} {
		p.Step(ev)
	}
	if p.Phase() != Running {
		t.Fatalf("phase %v after the recovery", p.Phase())
	}
	rec := p.Settled()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var back Checkpoint
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	q := New(Config{Policy: Rank, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true,
		Resumed: true, Spares: []string{"spare0"}})
	q.Restore(back)
	if q.Phase() != Running || q.Stage() != 0 || q.Epoch() != 1 || q.Version() != 2 {
		t.Fatalf("restored: phase %v stage %v epoch %d version %d", q.Phase(), q.Stage(), q.Epoch(), q.Version())
	}
	if q.AgentIncarnation(1) != 2 || q.AgentNode(1) != "spare0" || q.Relaunching(1) || q.AgentIncarnation(0) != 1 {
		t.Fatalf("restored agents: 1 is incarnation %d on %q (relaunching %v), 0 is incarnation %d", q.AgentIncarnation(1), q.AgentNode(1), q.Relaunching(1), q.AgentIncarnation(0))
	}
	if acts := q.Step(LeaderChanged{}); len(acts) != 0 {
		t.Fatalf("a settled record carried on: %s", kinds(acts))
	}
}
