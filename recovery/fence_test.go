package recovery

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// TestSelfFenceAt: when the root takes a lost node's fence, which has not
// reached it, for done: once the node has been silent for Root (what the
// detection saw counts) and the fence had FenceGrace to reach it.
func TestSelfFenceAt(t *testing.T) {
	sf := SelfFence{Ping: 250 * time.Millisecond, Confirm: 2 * time.Second}
	if sf.Root() != 2250*time.Millisecond || sf.Agent() != 1500*time.Millisecond {
		t.Fatalf("Root %v Agent %v, want 2.25 s and 1.5 s (docs/recovery.md)", sf.Root(), sf.Agent())
	}
	// The agent's kill, at most Agent+Tick after its last word, comes
	// before the root's confirmation, Root after the root's last word,
	// which is at most 1.5 pings before the agent's.
	if slack := sf.Root() - 3*sf.Ping/2 - (sf.Agent() + sf.Tick()); slack <= 0 {
		t.Fatalf("the agent kills %v after the root may confirm", -slack)
	}
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	for _, c := range []struct {
		name    string
		covered time.Duration // silence the detection saw at the declaration
		began   time.Duration // the fence's start, after the declaration
		want    time.Duration // after the declaration
	}{
		{"declared on gossip after 2.3 s of silence: the grace only", ms(2300), 0, FenceGrace},
		{"declared on the link's timeout (5 s)", 5 * time.Second, ms(10), ms(510)},
		{"declared after 2 s of silence: the rest of Root", 2 * time.Second, 0, FenceGrace},
		{"declared after 1 s (a successor's unadopted child)", time.Second, 0, ms(1250)},
		{"silence not known (a new leader's fence, an agent lost with its parent)", 0, 0, ms(2250)},
		{"fence begun late", ms(2250), time.Second, ms(1500)},
	} {
		if got := sf.SelfFenceAt(t0, c.covered, t0.Add(c.began)).Sub(t0); got != c.want {
			t.Errorf("%s: confirmed %v after the declaration, want %v", c.name, got, c.want)
		}
	}
}

// TestFenceHowRecorded: the record says how each fence was confirmed
// (the first confirmation: a fence that ends after the self-fence changes
// nothing), and a new leader keeps it.
func TestFenceHowRecorded(t *testing.T) {
	for _, policy := range []Policy{Rank, Job} {
		cfg := Config{Policy: policy, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true, Spares: []string{"s0"}}
		p := New(cfg)
		p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "silent"})
		if policy == Rank {
			p.Step(Committed{Epoch: 1, Stage: StageSuspend})
			p.Step(Suspended{Agent: 0, Epoch: 1})
		}
		p.Step(Committed{Epoch: 1, Stage: StageRelaunch})
		if acts := p.Step(Relaunched{Agent: 1, Incarnation: 2}); len(acts) != 0 {
			t.Fatalf("%v: relaunched, fence not confirmed: %v", policy, acts)
		}
		acts := p.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1, How: FenceSelf})
		if len(acts) != 1 {
			t.Fatalf("%v: self-fenced: %v, want the stage that starts ranks", policy, acts)
		}
		rec := acts[0].(Commit).Rec
		if want := map[Policy]Stage{Rank: StageRespawn, Job: StageRestartJob}[policy]; rec.Stage != want {
			t.Fatalf("%v: stage %v, want %v", policy, rec.Stage, want)
		}
		if acts := p.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1, How: FenceKilled}); len(acts) != 0 {
			t.Fatalf("%v: the fence's own end after the self-fence: %v", policy, acts)
		}
		check := func(who string, recs []AgentRecord) {
			t.Helper()
			for _, ar := range recs {
				if ar.Agent == 1 {
					if len(ar.Fenced) != 1 || ar.Fenced[0] != (FenceRecord{Node: "n1", Incarnation: 1, How: FenceSelf}) {
						t.Fatalf("%v, %s: fenced %+v, want n1 up to 1 self-fenced", policy, who, ar.Fenced)
					}
					return
				}
			}
			t.Fatalf("%v, %s: no record of agent 1 in %+v", policy, who, recs)
		}
		check("the record", rec.Agents)
		q := New(cfg)
		q.Restore(rec)
		check("a new leader's", q.agentRecords())
	}
}

// TestFenceSelfTimer: the planner decides when a fence from outside that
// has not reached its node counts as the node's own (FenceBegan →
// AwaitSelfFence at SelfFenceAt), and takes the root's word that the
// time passed unreached (SelfFenceDue) as the fence's confirmation,
// self-fenced, which lets the stage that starts ranks go on; a fence
// confirmed already is not confirmed again.
func TestFenceSelfTimer(t *testing.T) {
	sf := SelfFence{Ping: 250 * time.Millisecond, Confirm: 2 * time.Second}
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name      string
		confirmed bool // the fence reached the node and ended first
		want      []string
	}{
		{"unreached: self-fenced, ranks start", false, []string{"SelfFenced", "Commit"}},
		{"confirmed already: nothing", true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second,
				TableReady: true, Spares: []string{"s0"}, SelfFence: sf, Nodes: []string{"n0", "n1"}, Up: allUp(2), Tree: topology.Flat([]string{"n0", "n1"})})
			// Declared lost on its heartbeat's timeout, its link quiet for
			// 2.3 s: the self-fence bound (2 s) passed already.
			p.Step(LinkLost{Agent: 1, Err: "silent", Silent: true, At: t0, Direct: true, Quiet: 2300 * time.Millisecond})
			p.Step(AgentLost{Agent: 1, Incarnation: 1, Node: "n1", Err: "silent", Silent: true})
			p.Step(Committed{Epoch: 1, Stage: StageSuspend})
			p.Step(Suspended{Agent: 0, Epoch: 1})
			p.Step(Committed{Epoch: 1, Stage: StageRelaunch})
			p.Step(Relaunched{Agent: 1, Incarnation: 2})
			acts := p.Step(FenceBegan{Agent: 1, Node: "n1", Incarnation: 1, Began: t0})
			want := AwaitSelfFence{Agent: 1, Node: "n1", Incarnation: 1, At: t0.Add(FenceGrace)}
			if len(acts) != 1 || acts[0] != want {
				t.Fatalf("FenceBegan: %v, want %v", acts, want)
			}
			if c.confirmed {
				if acts := p.Step(FenceDone{Agent: 1, Node: "n1", Incarnation: 1, How: FenceKilled}); len(acts) != 1 {
					t.Fatalf("the fence's end: %v, want the stage that starts ranks", acts)
				}
			}
			acts = p.Step(SelfFenceDue{Agent: 1, Node: "n1", Incarnation: 1})
			var got []string
			for _, a := range acts {
				got = append(got, fmt.Sprintf("%T", a)[len("recovery."):])
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("SelfFenceDue: %v, want %v", acts, c.want)
			}
			if c.confirmed {
				return
			}
			if sfd := acts[0].(SelfFenced); sfd.Silence != sf.Root() || sfd.Node != "n1" {
				t.Errorf("SelfFenced %+v, want n1 silent for %v", sfd, sf.Root())
			}
			if rec := acts[1].(Commit).Rec; rec.Stage != StageRespawn || !slices.ContainsFunc(rec.Agents, func(ar AgentRecord) bool {
				return ar.Agent == 1 && slices.Contains(ar.Fenced, FenceRecord{Node: "n1", Incarnation: 1, How: FenceSelf})
			}) {
				t.Errorf("record %+v: want the respawn, n1 self-fenced", rec)
			}
		})
	}
}

// TestFenceWithoutTree: a lost agent of a launch tree is fenced from
// outside (Fence), and its ranks wait for the fence's confirmation; a job
// without a tree has its one agent on the root's machine, which
// LoseSubtree kills with its ranks there: its fence is confirmed at once,
// in the same step (FenceKilled), and nothing waits for it.
func TestFenceWithoutTree(t *testing.T) {
	for _, c := range []struct {
		name      string
		cfg       Config
		fence     bool // a Fence action, its confirmation awaited
		confirmed []FenceRecord
	}{
		{"tree", Config{Agents: 2, RankAgent: []int{0, 1}, Nodes: []string{"n0", "n1"}, Up: allUp(2), Tree: topology.Flat([]string{"n0", "n1"})},
			true, nil},
		{"no tree", Config{Agents: 1, RankAgent: []int{0, 0}, Nodes: []string{"n1"}, Up: allUp(1)},
			false, []FenceRecord{{Node: "n1", Incarnation: 1, How: FenceKilled}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Policy, cfg.Ranks, cfg.MaxRestarts, cfg.AckTimeout, cfg.TableReady = Rank, 2, 3, time.Second, true
			p := New(cfg)
			lost := len(cfg.Nodes) - 1
			acts := p.Step(LinkLost{Agent: lost, Err: "EOF"})
			fence := slices.ContainsFunc(acts, func(a Action) bool { _, ok := a.(Fence); return ok })
			p.Step(AgentLost{Agent: lost, Incarnation: 1, Node: "n1", Err: "EOF"})
			if fence != c.fence || p.fencePending() != c.fence {
				t.Fatalf("Fence %v (in %s), pending %v, want %v", fence, kinds(acts), p.fencePending(), c.fence)
			}
			if got := p.agents[lost].confirmed; !slices.Equal(got, c.confirmed) {
				t.Fatalf("confirmed fences %+v, want %+v", got, c.confirmed)
			}
		})
	}
}
