package recovery

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSupportMatrix is the planner's side of docs/recovery.md's support
// matrix: every policy, for every kind of program, against every kind of
// failure, on a job of 6 ranks over 3 agents (rank r on agent r%3),
// through the world of restart_test.go (every order of its events is
// the adversary's; every rank and agent incarnation must start once, no
// rank start while an older incarnation may still run on a lost agent
// that was not fenced). A cell either recovers (every rank runs its
// planner's incarnation, nothing left suspended) or ends the job with
// the code and the line the user is told.
func TestSupportMatrix(t *testing.T) {
	type program struct {
		name  string
		table bool  // the first node table exists (the client library's Publish)
		setup Event // what a rank said before the failure
	}
	programs := []program{
		{name: "client library", table: true},
		{name: "MPI", setup: PMIInit{Rank: 0, Node: "n0"}},
		{name: "plain"},
		// Opened the rank protocol, but failed before every rank published.
		{name: "client library before its table", setup: ProtocolOpened{Rank: 0, Node: "n0"}},
	}
	failures := []struct {
		name   string
		inject func(w *world)
		// none, noneKind and noneNode are the reason under policy None:
		// its Text (how the rank ended, or why its agent was lost), its
		// kind and (an agent's loss) its node.
		none     string
		noneKind ReasonKind
		noneNode string
		noSpare  bool
	}{
		{name: "rank exit", inject: func(w *world) { w.exit(1, 3) }, none: "exited with code 3", noneKind: ReasonRankEnded},
		{name: "rank signal", inject: func(w *world) { w.kill(1) }, none: "was killed by signal 9", noneKind: ReasonRankEnded},
		{name: "agent SIGKILL", inject: func(w *world) { w.loseAgent(1) }, none: "EOF", noneNode: "n1", noneKind: ReasonAgentLost},
		// An interior agent lost with the agent below it that could not
		// move to its backup parent: one turn of the root.
		{name: "interior agent", inject: func(w *world) { w.loseTogether(1, 2) }, none: "EOF", noneNode: "n1", noneKind: ReasonAgentLost},
		{name: "silent node (a spare)", inject: func(w *world) { w.loseSilent(1) }, none: "heartbeat timeout", noneNode: "n1", noneKind: ReasonAgentLost},
		{name: "crashed host (no spare: a survivor's slots)", inject: func(w *world) { w.loseSilent(1) }, none: "heartbeat timeout", noneNode: "n1", noneKind: ReasonAgentLost, noSpare: true},
		// The root's leader lost once the recovery committed a phase: a
		// successor carries it on from the state log's record.
		{name: "front-end lost (--replicas 3) mid-recovery", none: "EOF", noneNode: "n2", noneKind: ReasonAgentLost, inject: func(w *world) {
			w.loseAgent(2)
			for w.last.Epoch == 0 && w.p.Failure() == nil && w.deliver() {
			}
			if w.p.Phase() == Recovering {
				w.leaderChange()
			}
		}},
		{name: "during the launch (before any rank called anything)", inject: func(w *world) { w.loseAgent(0) }, none: "EOF", noneNode: "n0", noneKind: ReasonAgentLost},
	}
	for _, policy := range []Policy{None, Rank, Job} {
		for _, prog := range programs {
			for _, f := range failures {
				t.Run(fmt.Sprintf("%v/%s/%s", policy, prog.name, f.name), func(t *testing.T) {
					for seed := range uint64(8) {
						cfg := Config{Policy: policy, Ranks: 6, Agents: 3, RankAgent: []int{0, 1, 2, 0, 1, 2}, MaxRestarts: 3, AckTimeout: time.Second,
							TableReady: prog.table, Nodes: []string{"n0", "n1", "n2"}, Spares: []string{"s0"}, Oversubscribe: true}
						if f.noSpare {
							cfg.Spares = nil
						}
						if strings.HasPrefix(f.name, "during the launch") {
							if prog.name != "client library" {
								return // the same as the program's loss after the launch
							}
							// A client library program before its ranks
							// opened the protocol is a plain one.
							cfg.TableReady = false
						}
						w := newWorldConfig(t, seed, cfg)
						w.plain = policy == Rank && !cfg.TableReady && prog.setup == nil
						if prog.setup != nil {
							w.step(prog.setup)
						}
						if w.p.Failure() == nil {
							f.inject(w)
						}
						w.settle()
						fail := w.p.Failure()
						var want []ReasonKind // the kinds the job's end may have (none: it does not end)
						code := ExitLauncher
						switch {
						case policy == None:
							want = []ReasonKind{f.noneKind}
							if strings.HasPrefix(f.name, "rank exit") {
								code = 3
							} else if strings.HasPrefix(f.name, "rank signal") {
								code = 137
							}
							if fail != nil && (!strings.Contains(fail.Why.Text, f.none) || f.noneNode != "" && fail.Why.Node != f.noneNode) {
								w.fatalf("seed %d: failure %+v, want %q (node %q)", seed, fail, f.none, f.noneNode)
							}
						case policy == Rank && prog.name == "MPI":
							code = ExitUsage
							if fail == nil || !reflect.DeepEqual(fail.Why, Reason{Kind: ReasonPMIUnderRank, Rank: 0, Node: "n0"}) || fail.Code != code || !w.ended {
								w.fatalf("seed %d: failure %+v, want rank 0 on n0 speaking PMI-1 under --restart rank, code %d", seed, fail, code)
							}
							return
						case policy == Rank && prog.name == "client library before its table":
							// A rank's failure, or its agent's loss, before
							// the table: not recovered.
							want = []ReasonKind{ReasonNoTable, ReasonAgentNoTable}
							if strings.HasPrefix(f.name, "rank exit") {
								code = 3
							} else if strings.HasPrefix(f.name, "rank signal") {
								code = 137
							}
						}
						if want != nil {
							if fail == nil || !slices.Contains(want, fail.Why.Kind) || fail.Code != code || !w.ended {
								w.fatalf("seed %d: failure %+v, want one of the kinds %v with code %d", seed, fail, want, code)
							}
							return
						}
						if fail != nil {
							w.fatalf("seed %d: the job ended: %+v", seed, fail)
						}
						w.checkEnd(true)
						switch {
						case policy == Job:
							// An interior agent and the one below it lost
							// together are one restart of the job.
							if want := 1; w.p.restarts != want && f.name != "front-end lost (--replicas 3) mid-recovery" {
								w.fatalf("seed %d: %d restarts of the job, want %d", seed, w.p.restarts, want)
							}
						case w.plain:
							if w.overs == 0 {
								w.fatalf("seed %d: no recovery that started ranks alone ended", seed)
							}
						default:
							if w.resumes == 0 {
								w.fatalf("seed %d: no resume", seed)
							}
						}
					}
				})
			}
		}
	}
}

// TestRankAloneOrderOfActions follows a plain program's failures under
// policy Rank, one event at a time: the failed rank starts again alone,
// and a lost agent's ranks once it is up again and fenced; nothing is
// ever suspended or patched.
func TestRankAloneOrderOfActions(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 3, AckTimeout: time.Second})
	var over AloneOver
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{RankExited{Rank: 1, Incarnation: 1, Node: "n0", Signal: 9}, "Record,Report,Commit"},
		{Committed{Epoch: 1, Stage: StageRespawn}, "Respawn,Arm"},
		{RankStarted{Rank: 1, Incarnation: 1}, ""}, // not the new incarnation
		{RankStarted{Rank: 1, Incarnation: 2}, "AloneOver"},
		{RankStarted{Rank: 1, Incarnation: 2}, ""},
		// The agent of n1 is lost: started again, its fence confirmed,
		// then its ranks, alone.
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}, "Record,Report,Commit"},
		{Committed{Epoch: 2, Stage: StageRelaunch}, "Relaunch,Arm"},
		{Relaunched{Agent: 1, Incarnation: 2}, ""},
		{FenceDone{Agent: 1, Node: "n1", Incarnation: 1}, "Commit"},
		{Committed{Epoch: 2, Stage: StageRespawn}, "Respawn,Respawn,Arm"},
		{RankStarted{Rank: 3, Incarnation: 2}, ""},
		// A rank that publishes anyway is started too.
		{Respawned{Rank: 2, Incarnation: 2, Addr: []byte("a2")}, "AloneOver"},
	} {
		acts := step(t, p, tc.ev, tc.want)
		for _, a := range acts {
			switch a := a.(type) {
			case AloneOver:
				over = a
			case Record:
				if _, ok := tc.ev.(RankExited); ok && !reflect.DeepEqual(a.Why, Reason{Kind: ReasonRankRestart, Rank: 1, Node: "n0", Text: "was killed by signal 9 (killed)",
					Incarnation: 2, Restarts: 1, Max: 3, Alone: true}) {
					t.Fatalf("record %+v", a.Why)
				}
				if _, ok := tc.ev.(AgentLost); ok && !reflect.DeepEqual(a.Why, Reason{Kind: ReasonAgentRelaunch, Rank: NoRank, Node: "n1", Text: "EOF",
					Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{2, 3}, Alone: true}) {
					t.Fatalf("record %+v", a.Why)
				}
			case Commit:
				if !a.Rec.Alone {
					t.Fatalf("record of an alone recovery: %+v", a.Rec)
				}
			}
		}
	}
	if over.Epoch != 2 || fmt.Sprint(over.Ranks) != "[2 3]" || p.Phase() != Running || p.Incarnation(2) != 2 || p.Incarnation(1) != 2 || p.Incarnation(0) != 1 {
		t.Fatalf("over %+v, phase %v, incarnations %d %d %d", over, p.Phase(), p.Incarnation(0), p.Incarnation(1), p.Incarnation(2))
	}
	// Past --max-restarts it ends as for any rank.
	p2 := New(Config{Policy: Rank, Ranks: 1, Agents: 1, RankAgent: []int{0}, MaxRestarts: 0, AckTimeout: time.Second})
	p2.Step(RankExited{Rank: 0, Incarnation: 1, Node: "n0", Code: 4})
	if f := p2.Failure(); f == nil || f.Code != 4 || f.Why.Kind != ReasonRestartLimit || f.Why.JobWide || f.Why.Restarts != 0 || f.Why.Max != 0 {
		t.Fatalf("failure %+v", f)
	}
}

// TestFenceBeforeRestart: no stage that starts ranks (Respawn, RestartJob)
// is committed before every lost incarnation's fence is confirmed; a
// confirmation heard before the loss counts; a new leader fences again
// what its predecessor did not see confirmed, from the record.
func TestFenceBeforeRestart(t *testing.T) {
	for _, policy := range []Policy{Rank, Job} {
		cfg := Config{Policy: policy, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true, Spares: []string{"s0"}}
		// The fence confirmed before the planner hears of the loss (the
		// loss waited for orphans to move): nothing waits for it.
		p := New(cfg)
		p.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1})
		p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"})
		if policy == Rank {
			p.Step(Committed{Epoch: 1, Stage: StageSuspend})
			p.Step(Suspended{Agent: 0, Epoch: 1})
		}
		p.Step(Committed{Epoch: 1, Stage: StageRelaunch})
		acts := p.Step(Relaunched{Agent: 1, Incarnation: 2})
		if len(acts) != 1 || acts[0].(Commit).Rec.Stage == StageRelaunch {
			t.Fatalf("%v: fenced before the loss: %s %+v", policy, kinds(acts), acts)
		}
		// Not confirmed: the stage waits; a leader change fences again
		// from the record.
		p = New(cfg)
		var last Checkpoint
		take := func(acts []Action) string {
			for _, a := range acts {
				if c, ok := a.(Commit); ok {
					last = c.Rec
				}
			}
			return kinds(acts)
		}
		take(p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "heartbeat timeout", Silent: true}))
		if len(last.Agents) != 1 || !slices.Equal(last.Agents[0].Unfenced, []FenceRecord{{Node: "n1", Incarnation: 1}}) {
			t.Fatalf("%v: record %+v", policy, last)
		}
		if policy == Rank {
			take(p.Step(Committed{Epoch: 1, Stage: StageSuspend}))
			take(p.Step(Suspended{Agent: 0, Epoch: 1}))
		}
		take(p.Step(Committed{Epoch: 1, Stage: StageRelaunch}))
		if got := take(p.Step(Relaunched{Agent: 1, Incarnation: 2})); got != "" {
			t.Fatalf("%v: the stage went on before the fence: %s", policy, got)
		}
		q := New(Config{Policy: policy, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true, Resumed: true,
			Spares: []string{"s0"}})
		q.Restore(last)
		acts = q.Step(LeaderChanged{})
		if got := kinds(acts); got != "Commit,Fence" || acts[1] != (Fence{Agent: 1, Node: "n1", Incarnation: 1, Again: true}) {
			t.Fatalf("%v: leader change: %s %+v", policy, got, acts)
		}
		q.Step(Committed{Epoch: 2, Stage: StageRelaunch})
		q.Step(Relaunched{Agent: 1, Incarnation: 2})
		next := StageRespawn
		if policy == Job {
			next = StageRestartJob
		}
		acts = q.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1})
		if len(acts) != 1 || acts[0].(Commit).Rec.Stage != next {
			t.Fatalf("%v: after the fence: %s %+v", policy, kinds(acts), acts)
		}
		// Expired while the fence is awaited names it.
		p.Step(Expired{Epoch: 1, Stage: StageRelaunch})
		if f := p.Failure(); f == nil || f.Why.Kind != ReasonExpired || f.Why.Limit != time.Second ||
			!slices.Contains(f.Why.Awaited, Awaited{Rank: NoRank, Agent: NoAgent, Node: "n1", Incarnation: 1}) {
			t.Fatalf("%v: failure %+v", policy, f)
		}
	}
	// A rank failure while a lost agent's fence is awaited waits too.
	p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true})
	for _, ev := range []Event{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}, Committed{Epoch: 1, Stage: StageSuspend},
		Suspended{Agent: 0, Epoch: 1}, Committed{Epoch: 1, Stage: StageRelaunch}, Relaunched{Agent: 1, Incarnation: 2},
		RankExited{Rank: 0, Incarnation: 1, Node: "n0", Code: 1}, Committed{Epoch: 2, Stage: StageSuspend}, Suspended{Agent: 0, Epoch: 2}} {
		p.Step(ev)
	}
	if got := kinds(p.Step(Suspended{Agent: 1, Epoch: 2})); got != "Commit" || p.Stage() != StageRelaunch {
		t.Fatalf("after the second suspension: %s, stage %v", got, p.Stage())
	}
	if got := kinds(p.Step(Committed{Epoch: 2, Stage: StageRelaunch})); got != "Arm" {
		t.Fatalf("the relaunch stage with nothing to start but a fence to await: %s", got)
	}
	if acts := p.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1}); len(acts) != 1 || acts[0].(Commit).Rec.Stage != StageRespawn {
		t.Fatalf("after the fence: %s", kinds(acts))
	}
}

// TestJobWithoutTable: under policy Job nothing waits for a node table: a
// lost agent during the launch (no rank called anything yet), on a node
// that answers or not, is started again and the job restarted; a second
// loss before the restart went out joins it.
func TestJobWithoutTable(t *testing.T) {
	p := New(Config{Policy: Job, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 1, AckTimeout: time.Second, Spares: []string{"s0"}})
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{AgentLost{Agent: 0, Incarnation: 1, Node: "n0", Err: "EOF"}, "Record,Report,Commit"},
		{Committed{Epoch: 1, Stage: StageRelaunch}, "Relaunch,Arm"},
		// n1 goes silent before the restart went out: the same restart.
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "heartbeat timeout", Silent: true}, "Record,Report,Commit"},
		{Committed{Epoch: 2, Stage: StageRelaunch}, "Relaunch,Arm"},
		{Relaunched{Agent: 0, Incarnation: 2}, ""},
		{FenceDone{Agent: 0, Node: "n0", Incarnation: 1}, ""},
		{Relaunched{Agent: 1, Incarnation: 2}, ""},
		{FenceDone{Agent: 1, Node: "n1", Incarnation: 1}, "Commit"},
		{Committed{Epoch: 2, Stage: StageRestartJob}, "RestartJob,Arm"},
		{Restarted{Agent: 0, Epoch: 2}, ""},
		{Restarted{Agent: 1, Epoch: 2}, "RecoveryOver"}, // every agent restarted its ranks
	} {
		acts := step(t, p, tc.ev, tc.want)
		for _, a := range acts {
			if r, ok := a.(Record); ok && tc.ev.(AgentLost).Agent == 1 && !reflect.DeepEqual(r.Why, Reason{Kind: ReasonAgentRelaunch, Rank: NoRank, Node: "n1",
				Text: "heartbeat timeout", Place: Place{Kind: PlaceSpare, Node: "s0"}, Incarnation: 2, Restarts: 1, Max: 1, JobRestarts: 1, Decided: true}) {
				t.Fatalf("record %+v", r.Why)
			}
			if r, ok := a.(Relaunch); ok && r.Agent == 1 && r.Node != "s0" {
				t.Fatalf("relaunch %+v", r)
			}
		}
	}
	if p.Phase() != Running || p.restarts != 1 || p.Incarnation(3) != 2 {
		t.Fatalf("phase %v, restarts %d, incarnation %d", p.Phase(), p.restarts, p.Incarnation(3))
	}
}

// TestAloneAndJobRandom explores random interleavings of rank failures,
// agent losses (their node answering or silent), duplicate evidence and
// leader changes for jobs with no node table: a plain program under Rank,
// any program under Job.
func TestAloneAndJobRandom(t *testing.T) {
	for seed := range uint64(1000) {
		rng := rand.New(rand.NewPCG(seed, 5))
		ranks, agents := 1+rng.IntN(5), 1+rng.IntN(3)
		policy := Rank
		if seed%2 == 0 {
			policy = Job
		}
		cfg := Config{Policy: policy, Ranks: ranks, Agents: agents, MaxRestarts: 100, AckTimeout: time.Second, Oversubscribe: true}
		for r := range ranks {
			cfg.RankAgent = append(cfg.RankAgent, r%agents)
		}
		for a := range agents {
			cfg.Nodes = append(cfg.Nodes, fmt.Sprintf("n%d", a))
		}
		for s := range 2 {
			cfg.Spares = append(cfg.Spares, fmt.Sprintf("s%d", s))
		}
		w := newWorldConfig(t, seed, cfg)
		faults := 1 + rng.IntN(4)
		for step := 0; faults > 0 || len(w.events) > 0; step++ {
			if step > 20000 {
				w.fatalf("seed %d: no end", seed)
			}
			switch x := rng.IntN(12); {
			case faults > 0 && x == 0:
				w.loseAgent(rng.IntN(agents))
				faults--
			case faults > 0 && x == 1 && agents > 1:
				w.loseSilent(rng.IntN(agents))
				faults--
			case faults > 0 && x == 2:
				if r := rng.IntN(ranks); w.agentUp[w.cfg.RankAgent[r]] {
					w.kill(r)
				}
				faults--
			case faults > 0 && x == 3:
				w.leaderChange()
				faults--
			default:
				if !w.deliver() && faults > 0 {
					w.kill(rng.IntN(ranks))
					faults--
				}
			}
		}
		if f := w.p.Failure(); f != nil {
			// Only a node with nowhere to go ends such a job: every
			// survivor went silent too.
			if f.Why.Kind != ReasonAgentNoPlace || f.Why.Place.Kind != PlaceNoHost {
				w.fatalf("seed %d: the job ended: %+v", seed, f.Why)
			}
			continue
		}
		w.checkEnd(true)
	}
}
