package recovery

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// kinds names the actions' types, in order.
func kinds(acts []Action) string {
	var s []string
	for _, a := range acts {
		s = append(s, strings.TrimPrefix(fmt.Sprintf("%T", a), "recovery."))
	}
	return strings.Join(s, ",")
}

// step feeds ev to p and fails the test unless the actions' kinds are
// want; it returns the actions.
func step(t *testing.T, p *Planner, ev Event, want string) []Action {
	t.Helper()
	acts := p.Step(ev)
	if got := kinds(acts); got != want {
		t.Fatalf("Step(%#v) = %s, want %s (phase %v stage %v, failure %+v)", ev, got, want, p.Phase(), p.Stage(), p.Failure())
	}
	return acts
}

// TestRelaunchOrderOfActions follows a lost leaf agent through the restart
// protocol under policy Rank, one event at a time.
func TestRelaunchOrderOfActions(t *testing.T) {
	p := New(Config{Policy: Rank, Ranks: 4, Agents: 2, RankAgent: []int{0, 0, 1, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true})
	var relaunch Relaunch
	var respawns []Respawn
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}, "Record,Report,Commit"},
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "reported by its parent"}, ""}, // the same loss again
		{Committed{Epoch: 1, Stage: StageSuspend}, "Suspend,Arm"},
		{Suspended{Agent: 0, Epoch: 1}, "Commit"}, // the lost agent has nothing to acknowledge
		{Committed{Epoch: 1, Stage: StageRelaunch}, "Relaunch,Arm"},
		{Committed{Epoch: 1, Stage: StageRelaunch}, ""},
		{Relaunched{Agent: 1, Incarnation: 1}, ""}, // not the new incarnation
		{Relaunched{Agent: 1, Incarnation: 2}, ""}, // its lost incarnation is not fenced yet
		{Relaunched{Agent: 1, Incarnation: 2}, ""},
		{FenceDone{Agent: 1, Node: "n0", Incarnation: 1}, ""}, // another node's
		{FenceDone{Agent: 1, Node: "n1", Incarnation: 1}, "Commit"},
		{FenceDone{Agent: 1, Node: "n1", Incarnation: 1}, ""},
		{Committed{Epoch: 1, Stage: StageRespawn}, "Respawn,Respawn,Arm"},
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}, ""}, // stale: the old incarnation
		{Respawned{Rank: 2, Incarnation: 2, Addr: []byte("a2")}, ""},
		{Respawned{Rank: 3, Incarnation: 2, Addr: []byte("a3")}, "Commit"},
		{Committed{Epoch: 1, Stage: StagePatch}, "Patch,Arm"},
		{Patched{Agent: 0, Epoch: 1, Version: 2}, ""}, // the relaunched agent acknowledges too
		{Patched{Agent: 1, Epoch: 1, Version: 2}, "Commit"},
		{Committed{Epoch: 1, Stage: StageResume}, "Resume"},
	} {
		acts := step(t, p, tc.ev, tc.want)
		for _, a := range acts {
			switch a := a.(type) {
			case Relaunch:
				relaunch = a
			case Respawn:
				respawns = append(respawns, a)
			case Commit:
				if tc.ev == (Suspended{Agent: 0, Epoch: 1}) && (a.Rec.Stage != StageRelaunch || len(a.Rec.Agents) != 1 || !a.Rec.Agents[0].Lost) {
					t.Fatalf("relaunch record %+v", a.Rec)
				}
			case Record:
				if tc.ev == (AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}) && !reflect.DeepEqual(a.Why, Reason{Kind: ReasonAgentRelaunch, Rank: NoRank,
					Node: "n1", Text: "EOF", Incarnation: 2, Restarts: 1, Max: 3, Ranks: []int{2, 3}}) {
					t.Fatalf("record %+v", a.Why)
				}
			}
		}
	}
	if relaunch != (Relaunch{Agent: 1, Node: "n1", Incarnation: 2, Epoch: 1}) {
		t.Fatalf("relaunch %+v", relaunch)
	}
	if len(respawns) != 2 || respawns[0] != (Respawn{Rank: 2, Agent: 1, Incarnation: 2, Epoch: 1}) || respawns[1].Rank != 3 {
		t.Fatalf("respawns %+v", respawns)
	}
	if p.Phase() != Running || p.AgentIncarnation(1) != 2 || p.Relaunching(1) || p.Version() != 2 {
		t.Fatalf("phase %v, agent incarnation %d, version %d", p.Phase(), p.AgentIncarnation(1), p.Version())
	}
	// A loss of the new incarnation is a loss again.
	if got := kinds(p.Step(AgentLost{Agent: 1, Incarnation: 2, Node: "n1", Err: "EOF"})); got != "Record,Report,Commit" {
		t.Fatalf("second loss: %s", got)
	}
}

// TestRelaunchEnds lists the losses that still end the job, and why.
func TestRelaunchEnds(t *testing.T) {
	base := Config{Policy: Rank, Ranks: 4, Agents: 4, RankAgent: []int{0, 1, 2, 3}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true}
	for _, tc := range []struct {
		name   string
		cfg    func(*Config)
		before []Event
		ev     Event
		want   Reason // the failure's
	}{
		{name: "policy none", cfg: func(c *Config) { c.Policy = None }, ev: AgentLost{Agent: 0, Node: "n0", Err: "EOF"},
			want: Reason{Kind: ReasonAgentLost, Rank: NoRank, Node: "n0", Text: "EOF", Max: 3}},
		{name: "silent node", ev: AgentLost{Agent: 0, Node: "n0", Err: "no heartbeat", Silent: true},
			want: Reason{Kind: ReasonAgentNoPlace, Rank: NoRank, Node: "n0", Text: "no heartbeat", Max: 3, Place: Place{Kind: PlaceNoSlots, Need: 1}}},
		{name: "before the node table, the rank protocol opened", cfg: func(c *Config) { c.TableReady = false }, before: []Event{ProtocolOpened{Rank: 2, Node: "n2"}},
			ev:   AgentLost{Agent: 0, Node: "n0", Err: "EOF"},
			want: Reason{Kind: ReasonAgentNoTable, Rank: NoRank, Node: "n0", Text: "EOF", Max: 3}},
		{name: "agent restarts past the limit", cfg: func(c *Config) { c.MaxRestarts = 0 }, ev: AgentLost{Agent: 0, Node: "n0", Err: "EOF"},
			want: Reason{Kind: ReasonAgentLimit, Rank: NoRank, Node: "n0", Text: "EOF", Restarts: 0, Max: 0}},
		{name: "its rank past the limit", cfg: func(c *Config) { c.MaxRestarts = 1; c.Incarnations = []uint64{2}; c.RankRestarts = []int{1} },
			ev:   AgentLost{Agent: 0, Node: "n0", Err: "EOF"},
			want: Reason{Kind: ReasonAgentRankLimit, Rank: 0, Node: "n0", Text: "EOF", Restarts: 1, Max: 1, History: []Ended{{Incarnation: 2}}}},
		{name: "relaunch failed", before: []Event{AgentLost{Agent: 0, Node: "n0", Err: "EOF"}, Committed{Epoch: 1, Stage: StageSuspend},
			Suspended{Agent: 1, Epoch: 1}, Suspended{Agent: 2, Epoch: 1}, Suspended{Agent: 3, Epoch: 1}, Committed{Epoch: 1, Stage: StageRelaunch}},
			ev:   RelaunchFailed{Agent: 0, Incarnation: 2, Msg: "ssh: connection refused"},
			want: Reason{Kind: ReasonRelaunchFailed, Rank: NoRank, Node: "n0", Incarnation: 2, Text: "ssh: connection refused"}},
		{name: "relaunch expired", before: []Event{AgentLost{Agent: 0, Node: "n0", Err: "EOF"}, Committed{Epoch: 1, Stage: StageSuspend},
			Suspended{Agent: 1, Epoch: 1}, Suspended{Agent: 2, Epoch: 1}, Suspended{Agent: 3, Epoch: 1}, Committed{Epoch: 1, Stage: StageRelaunch}},
			ev: Expired{Epoch: 1, Stage: StageRelaunch},
			want: Reason{Kind: ReasonExpired, Rank: NoRank, Epoch: 1, Stage: StageRelaunch, Limit: time.Second,
				Awaited: []Awaited{{Rank: NoRank, Agent: NoAgent, Node: "n0"}, {Rank: NoRank, Agent: NoAgent, Node: "n0", Incarnation: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := New(cfg)
			for _, ev := range tc.before {
				p.Step(ev)
			}
			acts := p.Step(tc.ev)
			f := p.Failure()
			if f == nil || !reflect.DeepEqual(f.Why, tc.want) || f.Code != ExitLauncher || p.Phase() != Ending || !strings.HasSuffix(kinds(acts), "Terminate") {
				t.Fatalf("acts %s, phase %v, failure %+v; want %+v", kinds(acts), p.Phase(), f, tc.want)
			}
		})
	}
}

// A node that went silent is not tried again: its agent starts on the
// next spare, under each policy; a second silent node takes the next one;
// with none left the job ends. A new leader's planner knows which spares
// serve already from the committed record.
func TestRelaunchSpare(t *testing.T) {
	for _, policy := range []Policy{Rank, Job} {
		p := New(Config{Policy: policy, Ranks: 6, Agents: 3, RankAgent: []int{0, 0, 1, 1, 2, 2}, MaxRestarts: 3, AckTimeout: time.Second,
			TableReady: true, Spares: []string{"s0", "s1"}})
		acts := p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "heartbeat timeout", Silent: true})
		rec, ok := acts[0].(Record)
		if !ok || rec.Why.Kind != ReasonAgentRelaunch || rec.Why.Node != "n1" || rec.Why.Place != (Place{Kind: PlaceSpare, Node: "s0"}) || rec.Why.Incarnation != 2 {
			t.Fatalf("%v: %s %+v", policy, kinds(acts), acts)
		}
		var relaunch Relaunch
		var recs []AgentRecord
		for _, act := range acts {
			if c, ok := act.(Commit); ok && len(c.Rec.Agents) > 0 {
				recs = c.Rec.Agents
			}
		}
		stages := []Stage{StageSuspend, StageRelaunch}
		if policy == Job {
			stages = []Stage{StageRelaunch}
		}
		for _, st := range stages {
			for _, a := range p.Step(Committed{Epoch: 1, Stage: st}) {
				if r, ok := a.(Relaunch); ok {
					relaunch = r
				}
			}
			for a := range 3 {
				for _, act := range p.Step(Suspended{Agent: a, Epoch: 1}) {
					if c, ok := act.(Commit); ok && len(c.Rec.Agents) > 0 {
						recs = c.Rec.Agents
					}
				}
			}
		}
		if relaunch != (Relaunch{Agent: 1, Node: "s0", Incarnation: 2, Epoch: 1}) {
			t.Fatalf("%v: relaunch %+v", policy, relaunch)
		}
		if len(recs) != 1 || recs[0].Node != "s0" {
			t.Fatalf("%v: committed agents %+v", policy, recs)
		}
		// A new leader restores the record: s0 serves, s1 is next.
		q := New(Config{Policy: policy, Ranks: 6, Agents: 3, RankAgent: []int{0, 0, 1, 1, 2, 2}, MaxRestarts: 3, AckTimeout: time.Second,
			TableReady: true, Spares: []string{"s0", "s1"}})
		q.restoreAgents(recs)
		if got := q.nextSpare(); got != "s1" {
			t.Fatalf("%v: after a restore the next spare is %q", policy, got)
		}
		// Two more silent nodes: the second has no spare.
		p2 := New(Config{Policy: policy, Ranks: 6, Agents: 3, RankAgent: []int{0, 0, 1, 1, 2, 2}, MaxRestarts: 3, AckTimeout: time.Second,
			TableReady: true, Spares: []string{"s0"}})
		p2.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "silent", Silent: true})
		p2.Step(AgentLost{Agent: 2, Incarnation: 1, Node: "n2", Err: "silent", Silent: true})
		if f := p2.Failure(); f == nil || f.Why.Kind != ReasonAgentNoPlace || f.Why.Node != "n2" || f.Why.Place != (Place{Kind: PlaceNoSlots, Need: 2}) {
			t.Fatalf("%v: failure %+v", policy, f)
		}
	}
}

// relaunchOf runs a lost agent's recovery under policy Rank up to its
// Relaunch: every live agent acknowledges the suspension.
func relaunchOf(t *testing.T, p *Planner, agents int, ev AgentLost) (Relaunch, []AgentRecord) {
	t.Helper()
	var relaunch Relaunch
	var recs []AgentRecord
	take := func(acts []Action) {
		for _, act := range acts {
			switch a := act.(type) {
			case Relaunch:
				relaunch = a
			case Commit:
				if len(a.Rec.Agents) > 0 {
					recs = a.Rec.Agents
				}
			}
		}
	}
	take(p.Step(ev))
	if f := p.Failure(); f != nil {
		t.Fatalf("the job ended: %+v", f.Why)
	}
	take(p.Step(FenceDone{Agent: ev.Agent, Node: ev.Node, Incarnation: p.AgentIncarnation(ev.Agent)}))
	epoch := p.Epoch()
	take(p.Step(Committed{Epoch: epoch, Stage: StageSuspend}))
	for a := range agents {
		take(p.Step(Suspended{Agent: a, Epoch: epoch}))
	}
	take(p.Step(Committed{Epoch: epoch, Stage: StageRelaunch}))
	if relaunch.Agent != ev.Agent {
		t.Fatalf("no relaunch of agent %d: %+v", ev.Agent, relaunch)
	}
	return relaunch, recs
}

// With no spare left, a silent node's agent starts again as a second
// agent on a surviving host: the first, in agent order, whose free slots
// hold its ranks; else, with Oversubscribe, the least loaded one; else
// the job ends naming why. A survivor-hosted agent lost again moves under
// the lost node's own name; a new leader's planner, from the committed
// record, counts it where it runs.
func TestRelaunchSurvivorSlots(t *testing.T) {
	// Four nodes of 2 ranks each (rank r on agent r/2); n3 ran 1 rank.
	base := func() Config {
		return Config{Policy: Rank, Ranks: 7, Agents: 4, RankAgent: []int{0, 0, 1, 1, 2, 2, 3}, MaxRestarts: 3, AckTimeout: time.Second,
			TableReady: true, Nodes: []string{"n0", "n1", "n2", "n3"}}
	}
	silent := func(a int, node string) AgentLost {
		return AgentLost{Agent: a, Incarnation: 0, Node: node, Err: "heartbeat timeout", Silent: true}
	}
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		lost  int
		want  string // the relaunch's node ("": the job ends)
		where Place  // in the record, or in the failure
	}{
		{name: "free slots, first in agent order", lost: 1,
			cfg:  func(c *Config) { c.Slots = map[string]int{"n0": 3, "n2": 4, "n3": 4} },
			want: "n2+n1", where: Place{Kind: PlaceFreeSlots, Node: "n2+n1", Host: "n2"}},
		{name: "the lost node's own host is not a place", lost: 3,
			cfg:  func(c *Config) { c.Slots = map[string]int{"n3": 8, "n1": 3} },
			want: "n1+n3", where: Place{Kind: PlaceFreeSlots, Node: "n1+n3", Host: "n1"}},
		{name: "a spare comes first", lost: 1,
			cfg:  func(c *Config) { c.Slots = map[string]int{"n2": 4}; c.Spares = []string{"s0"} },
			want: "s0", where: Place{Kind: PlaceSpare, Node: "s0"}},
		{name: "oversubscribe: the least loaded", lost: 0,
			cfg:  func(c *Config) { c.Slots = map[string]int{"n1": 3}; c.Oversubscribe = true },
			want: "n3+n0", where: Place{Kind: PlaceShared, Node: "n3+n0", Host: "n3", Load: 1}},
		{name: "oversubscribe: ties go to agent order", lost: 3,
			cfg:  func(c *Config) { c.Oversubscribe = true },
			want: "n0+n3", where: Place{Kind: PlaceShared, Node: "n0+n3", Host: "n0", Load: 2}},
		{name: "no free slot: the job ends", lost: 1,
			cfg:   func(c *Config) { c.Slots = map[string]int{"n0": 3, "n2": 3, "n3": 2} },
			where: Place{Kind: PlaceNoSlots, Need: 2}},
		{name: "unknown slot counts: no free slot", lost: 3,
			where: Place{Kind: PlaceNoSlots, Need: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := New(cfg)
			node := cfg.Nodes[tc.lost]
			if tc.want == "" {
				acts := p.Step(silent(tc.lost, node))
				if f := p.Failure(); f == nil || f.Why.Kind != ReasonAgentNoPlace || f.Why.Place != tc.where || !strings.HasSuffix(kinds(acts), "Terminate") {
					t.Fatalf("acts %s, failure %+v; want %+v", kinds(acts), f, tc.where)
				}
				return
			}
			acts := p.Step(silent(tc.lost, node))
			if rec, ok := acts[0].(Record); !ok || rec.Why.Kind != ReasonAgentRelaunch || rec.Why.Place != tc.where || rec.Why.Incarnation != 2 {
				t.Fatalf("%s: %+v; want %+v", kinds(acts), acts, tc.where)
			}
			q := New(cfg)
			rl, _ := relaunchOf(t, q, cfg.Agents, silent(tc.lost, node))
			if rl.Node != tc.want || q.AgentNode(tc.lost) != tc.want {
				t.Fatalf("relaunch %+v, agent node %q; want %q", rl, q.AgentNode(tc.lost), tc.want)
			}
		})
	}

	t.Run("second loss and a successor", func(t *testing.T) {
		cfg := base()
		cfg.Slots = map[string]int{"n0": 4, "n1": 4, "n2": 4, "n3": 4}
		p := New(cfg)
		rl, _ := relaunchOf(t, p, 4, silent(1, "n1"))
		if rl.Node != "n0+n1" {
			t.Fatalf("first relaunch %+v", rl)
		}
		finish := func(p *Planner, agent int, inc uint64) {
			t.Helper()
			epoch := p.Epoch()
			p.Step(Relaunched{Agent: agent, Incarnation: inc})
			p.Step(Committed{Epoch: epoch, Stage: StageRespawn})
			var patch Patch
			for r := range cfg.Ranks {
				if cfg.RankAgent[r] == agent {
					for _, act := range p.Step(Respawned{Rank: r, Incarnation: p.Incarnation(r), Addr: []byte("a")}) {
						if c, ok := act.(Commit); ok && c.Rec.Stage == StagePatch {
							for _, act := range p.Step(Committed{Epoch: epoch, Stage: StagePatch}) {
								if pa, ok := act.(Patch); ok {
									patch = pa
								}
							}
						}
					}
				}
			}
			for a := range cfg.Agents {
				p.Step(Patched{Agent: a, Epoch: epoch, Version: patch.Version})
			}
			p.Step(Committed{Epoch: epoch, Stage: StageResume})
			if p.Phase() != Running {
				t.Fatalf("phase %v (stage %v) after the recovery", p.Phase(), p.Stage())
			}
		}
		finish(p, 1, 2)
		// n0 holds 4 ranks now: full. The guest lost again (EOF: its host
		// answers) starts on its own name again.
		rl, _ = relaunchOf(t, p, 4, AgentLost{Agent: 1, Node: "n0+n1", Err: "EOF"})
		if rl.Node != "n0+n1" || rl.Incarnation != 3 {
			t.Fatalf("relaunch after EOF %+v", rl)
		}
		finish(p, 1, 3)
		// n0 goes silent: its own agent first. n0+n1 is on the silent
		// host; n2 has the first free slots.
		rl, _ = relaunchOf(t, p, 4, silent(0, "n0"))
		if rl.Node != "n2+n0" {
			t.Fatalf("n0's relaunch %+v", rl)
		}
		finish(p, 0, 2)
		// Then the guest: n2 is full now (4 ranks), n3 has 2 free; the
		// name keeps n1 as its base, not nested.
		rl, recs := relaunchOf(t, p, 4, silent(1, "n0+n1"))
		if rl.Node != "n3+n1" {
			t.Fatalf("the guest's relaunch %+v", rl)
		}
		finish(p, 1, 4)
		// A successor from the committed record knows where each agent
		// runs: n3 goes silent; n2 (n2 and n2+n0) is full, n0 and n1 run
		// nothing, so the job ends, and with --oversubscribe n2 takes n3's
		// rank.
		q := New(cfg)
		q.restoreAgents(recs)
		if q.AgentNode(1) != "n3+n1" || q.AgentNode(0) != "n2+n0" {
			t.Fatalf("restored nodes %q %q", q.AgentNode(0), q.AgentNode(1))
		}
		q.Step(silent(3, "n3"))
		if f := q.Failure(); f == nil || f.Why.Kind != ReasonAgentNoPlace || f.Why.Place != (Place{Kind: PlaceNoSlots, Need: 1}) {
			t.Fatalf("successor: failure %+v", f)
		}
		cfg.Oversubscribe = true
		q = New(cfg)
		q.restoreAgents(recs)
		if rl, _ := relaunchOf(t, q, 4, silent(3, "n3")); rl.Node != "n2+n3" {
			t.Fatalf("successor with --oversubscribe: relaunch %+v", rl)
		}
	})
}

func TestHostOf(t *testing.T) {
	for _, tc := range []struct{ name, host string }{{"node001", "node001"}, {"node001+node003", "node001"}, {"", ""}} {
		if got := HostOf(tc.name); got != tc.host {
			t.Errorf("HostOf(%q) = %q, want %q", tc.name, got, tc.host)
		}
	}
	if got := GuestNode("b", "a+n3"); got != "b+n3" {
		t.Errorf("GuestNode(b, a+n3) = %q", got)
	}
	if got := GuestNode("a", "n3"); got != "a+n3" {
		t.Errorf("GuestNode(a, n3) = %q", got)
	}
}

// TestRelaunchJob: under policy Job, the agent comes back and the whole
// job starts again on the healed tree; the ends of the old incarnation
// that arrive meanwhile are stale.
func TestRelaunchJob(t *testing.T) {
	p := New(Config{Policy: Job, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 1, AckTimeout: time.Second, TableReady: true})
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "EOF"}, "Record,Report,Commit"},
		{RankExited{Rank: 0, Incarnation: 1, Node: "n0", Code: 1}, ""}, // a consequence
		{Committed{Epoch: 1, Stage: StageRelaunch}, "Relaunch,Arm"},
		{Relaunched{Agent: 1, Incarnation: 2}, ""}, // the fence is awaited
		{FenceDone{Agent: 1, Node: "n1", Incarnation: 1}, "Commit"},
		{Committed{Epoch: 1, Stage: StageRestartJob}, "RestartJob,Arm"},
		{Restarted{Agent: 0, Epoch: 1}, ""},
		{Restarted{Agent: 1, Epoch: 1}, "RecoveryOver"}, // every agent restarted its ranks
	} {
		if got := kinds(p.Step(tc.ev)); got != tc.want {
			t.Fatalf("Step(%#v) = %s, want %s (phase %v stage %v)", tc.ev, got, tc.want, p.Phase(), p.Stage())
		}
	}
	if p.Phase() != Running || p.Incarnation(0) != 2 || p.Incarnation(1) != 2 || p.AgentIncarnation(1) != 2 {
		t.Fatalf("phase %v, incarnations %d %d, agent %d", p.Phase(), p.Incarnation(0), p.Incarnation(1), p.AgentIncarnation(1))
	}
	p.Step(AgentLost{Agent: 0, Incarnation: 1, Node: "n0", Err: "EOF"})
	if f := p.Failure(); f == nil || f.Why.Kind != ReasonAgentJobLimit || f.Why.Restarts != 1 || f.Why.Max != 1 {
		t.Fatalf("failure %+v", f)
	}
}

// TestRelaunchSecondFailureAnywhere loses an agent, then before every
// event of its recovery injects a second fault: a rank of another agent
// killed, another agent lost, the same agent lost again (its new
// incarnation), a leader change. The job always recovers; every agent and
// rank incarnation starts once.
func TestRelaunchSecondFailureAnywhere(t *testing.T) {
	for _, fault := range []string{"rank", "other agent", "same agent", "leader", "leader+rank"} {
		for k := 0; k < 40; k++ {
			for seed := range uint64(5) {
				w := newWorld(t, seed, Rank, 4, 3, 5)
				w.loseAgent(0)
				for i := 0; w.deliver(); i++ {
					if i != k {
						continue
					}
					switch fault {
					case "rank":
						w.kill(1)
					case "other agent":
						w.loseAgent(2)
					case "same agent":
						w.loseAgent(0)
					case "leader":
						w.leaderChange()
					case "leader+rank":
						w.leaderChange()
						w.kill(2)
					}
				}
				w.checkEnd(true)
			}
		}
	}
}

// TestRelaunchRandom explores random interleavings of agent losses, rank
// failures, duplicate and stale evidence and leader changes, under both
// restart policies.
func TestRelaunchRandom(t *testing.T) {
	for seed := range uint64(2000) {
		rng := rand.New(rand.NewPCG(seed, 41))
		ranks, agents := 1+rng.IntN(5), 1+rng.IntN(3)
		policy := Rank
		if seed%3 == 0 {
			policy = Job
		}
		w := newWorld(t, seed, policy, ranks, agents, 100)
		faults := 1 + rng.IntN(4)
		for step := 0; faults > 0 || len(w.events) > 0; step++ {
			if step > 20000 {
				w.fatalf("seed %d: no end", seed)
			}
			switch x := rng.IntN(12); {
			case faults > 0 && x == 0:
				w.loseAgent(rng.IntN(agents))
				faults--
			case faults > 0 && x == 1 && policy == Rank:
				if r := rng.IntN(ranks); w.agentUp[w.cfg.RankAgent[r]] {
					w.kill(r)
				}
				faults--
			case faults > 0 && x == 2:
				w.leaderChange()
				faults--
			case x == 3 && len(w.done) > 0:
				// Stale evidence: the loss of an agent incarnation that was
				// replaced.
				if a := rng.IntN(agents); w.agentInc[a] > 1 {
					w.step(AgentLost{Agent: a, Incarnation: w.agentInc[a] - 1, Node: "n", Err: "EOF"})
				}
			default:
				if !w.deliver() && faults > 0 {
					w.loseAgent(rng.IntN(agents))
					faults--
				}
			}
		}
		w.checkEnd(true)
	}
}

// TestRelaunchCommittedAgain: a new leader that commits the Relaunch stage
// again starts no incarnation its predecessor started (the root's link is
// of it); one that is up counts as relaunched at once, and the recovery
// goes on in the same step; one that is not up, or whose link ended, is
// waited for (its link's coming up, or its loss, says what became of it).
func TestRelaunchCommittedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		up     []bool
		closed bool
		want   string // the actions of the stage committed again
	}{
		{"up", []bool{true, true}, false, "Commit"},
		{"not up", []bool{true, false}, false, "Arm"},
		{"closed", []bool{true, true}, true, "Arm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second,
				TableReady: true, Nodes: []string{"n0", "n1"}, Resumed: true, Up: tc.up})
			p.Restore(Checkpoint{Epoch: 1, Stage: StageRelaunch, Agents: []AgentRecord{{Agent: 1, Node: "n1", Incarnation: 2, Restarts: 1}},
				Ranks: []RankRecord{{Rank: 1, Agent: 1, Incarnation: 1, Restarts: 1, Failed: true}}})
			if tc.closed {
				p.closeLink(1, 2)
			}
			p.Step(LeaderChanged{})
			acts := step(t, p, Committed{Epoch: p.Epoch(), Stage: StageRelaunch}, tc.want)
			if c, ok := acts[0].(Commit); tc.want == "Commit" && (!ok || c.Rec.Stage != StageRespawn) {
				t.Fatalf("after the relaunch: %+v, want the Respawn stage's commit", acts[0])
			}
			if st := p.agents[1].st; (st == aUp) != (tc.want == "Commit") || p.AgentIncarnation(1) != 2 {
				t.Fatalf("agent 1: state %v, incarnation %d", st, p.AgentIncarnation(1))
			}
		})
	}
}
