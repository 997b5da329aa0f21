package recovery

import (
	"reflect"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// TestSilentNodeSelfFenceCountsFromDeclaration: how long a lost node had
// been silent when its link was declared lost decides when a fence that
// has not reached it counts as its own (AwaitSelfFence.At): the planner
// takes the silence from what the root saw of the link (LinkLost), and
// counts the self-fence bound (Root, 2 s here) from the node's last word.
func TestSilentNodeSelfFenceCountsFromDeclaration(t *testing.T) {
	sf := SelfFence{Ping: time.Second, Confirm: time.Second}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	began := t0.Add(100 * time.Millisecond)
	for _, c := range []struct {
		name    string
		resumed bool
		lost    []LinkLost // declarations, in order (none: lost with an agent above it)
		fence   uint64     // the incarnation fenced
		want    time.Time
	}{
		{"its link ended: the node answered, the bound counts from the declaration", false,
			[]LinkLost{{Err: "EOF", At: t0, Direct: true, Quiet: 5 * time.Second}}, 1, t0.Add(2 * time.Second)},
		{"its own link quiet 1.2 s: 0.8 s more", false,
			[]LinkLost{{Err: "heartbeat", Silent: true, At: t0, Direct: true, Quiet: 1200 * time.Millisecond}}, 1, t0.Add(800 * time.Millisecond)},
		{"its own link quiet past the bound: the fence's grace", false,
			[]LinkLost{{Err: "heartbeat", Silent: true, At: t0, Direct: true, Quiet: 3 * time.Second}}, 1, began.Add(FenceGrace)},
		{"its parent found it silent: at least Root, the fence's grace", false,
			[]LinkLost{{Err: "heartbeat", Silent: true, At: t0}}, 1, began.Add(FenceGrace)},
		{"a lost root's child a successor never heard: silent since the successor started", true,
			[]LinkLost{{Err: "not adopted", Silent: true, At: t0}}, 1, began.Add(FenceGrace)},
		{"not declared here: from the fence's beginning, silence not known", false,
			nil, 1, began.Add(2 * time.Second)},
		{"another incarnation's declaration counts nothing", false,
			[]LinkLost{{Err: "heartbeat", Silent: true, At: t0, Direct: true, Quiet: 3 * time.Second}}, 2, began.Add(2 * time.Second)},
		{"declared twice: the first counts", false,
			[]LinkLost{{Err: "heartbeat", Silent: true, At: t0, Direct: true, Quiet: 3 * time.Second},
				{Err: "EOF", At: t0.Add(time.Second)}}, 1, began.Add(FenceGrace)},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, AckTimeout: time.Second,
				TableReady: true, SelfFence: sf, Resumed: c.resumed, Started: t0.Add(-3 * time.Second), Tree: topology.Flat([]string{"n0", "n1"})})
			for _, ll := range c.lost {
				ll.Agent = 1
				p.noteDeclared(ll, 1) // what linkLost notes before it decides the loss
			}
			acts := p.Step(FenceBegan{Agent: 1, Node: "n1", Incarnation: c.fence, Began: began})
			want := []Action{AwaitSelfFence{Agent: 1, Node: "n1", Incarnation: c.fence, At: c.want}}
			if !reflect.DeepEqual(acts, want) {
				t.Fatalf("FenceBegan: %+v, want %+v", acts, want)
			}
		})
	}
}

// TestSilentNodeDeclaredOnItsLinksLoss: the declaration is noted where the
// loss is decided (LinkLost), once per incarnation, and a link already
// closed declares nothing.
func TestSilentNodeDeclaredOnItsLinksLoss(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := New(Config{Policy: Rank, Ranks: 2, Agents: 2, RankAgent: []int{0, 1}, MaxRestarts: 3, TableReady: true,
		SelfFence: SelfFence{Ping: time.Second, Confirm: time.Second}, Up: allUp(2)})
	p.Step(LinkLost{Agent: 1, Err: "heartbeat", Silent: true, At: t0, Direct: true, Quiet: 1500 * time.Millisecond})
	p.Step(LinkLost{Agent: 1, Err: "EOF", At: t0.Add(time.Second)}) // closed already
	if d := p.agents[1].declared; d != (declaration{inc: 1, at: t0, silence: 1500 * time.Millisecond}) {
		t.Fatalf("declaration %+v", d)
	}
}

// TestRecoveryOverOnceEveryLiveAgentAcked: a recovery is over, once, when
// every agent whose link has not ended acknowledged its last phase (Resume,
// or RestartJob) of the epoch under way; the record it is committed with
// is the settled one.
func TestRecoveryOverOnceEveryLiveAgentAcked(t *testing.T) {
	resume := func(p *Planner) uint64 {
		p.Step(RankExited{Rank: 0, Incarnation: 1, Node: "n0", Signal: 9})
		p.Step(Committed{Epoch: 1, Stage: StageSuspend})
		p.Step(Suspended{Agent: 0, Epoch: 1})
		p.Step(Suspended{Agent: 1, Epoch: 1})
		p.Step(Suspended{Agent: 2, Epoch: 1})
		p.Step(Committed{Epoch: 1, Stage: StageRespawn})
		p.Step(Respawned{Rank: 0, Incarnation: 2, Addr: []byte("a")})
		p.Step(Committed{Epoch: 1, Stage: StagePatch})
		for a := range 3 {
			p.Step(Patched{Agent: a, Epoch: 1, Version: 2})
		}
		if got := kinds(p.Step(Committed{Epoch: 1, Stage: StageResume})); got != "Resume" {
			t.Fatalf("resume: %s", got)
		}
		return 1
	}
	for _, c := range []struct {
		name   string
		closed []int // agents whose link ended before the acks
		acks   []Event
		want   []int // the acks (by index) that end the recovery
	}{
		{"every agent", nil, []Event{Resumed{Agent: 0, Epoch: 1}, Resumed{Agent: 1, Epoch: 1},
			Resumed{Agent: 2, Epoch: 1}}, []int{2}},
		{"an agent whose link ended is not waited for", []int{2}, []Event{Resumed{Agent: 0, Epoch: 1},
			Resumed{Agent: 1, Epoch: 1}}, []int{1}},
		{"an ack again, and an older epoch's, count nothing", nil, []Event{Resumed{Agent: 0, Epoch: 1},
			Resumed{Agent: 0, Epoch: 1}, Resumed{Agent: 1, Epoch: 0}}, nil},
		{"over once", []int{2}, []Event{Resumed{Agent: 0, Epoch: 1}, Resumed{Agent: 1, Epoch: 1},
			Resumed{Agent: 2, Epoch: 1}}, []int{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 3, Agents: 3, RankAgent: []int{0, 1, 2}, MaxRestarts: 3, AckTimeout: time.Second, TableReady: true, Up: allUp(3)})
			epoch := resume(p)
			for _, x := range c.closed {
				p.haveLink(x, AgentLink{Up: true, Closed: true})
			}
			var got []int
			for i, ev := range c.acks {
				for _, a := range p.Step(ev) {
					over, ok := a.(RecoveryOver)
					if !ok {
						t.Fatalf("ack %d: %T", i, a)
					}
					if want := (RecoveryOver{Epoch: epoch, Stage: StageResume, Record: p.Settled()}); !reflect.DeepEqual(over, want) {
						t.Fatalf("ack %d: %+v, want %+v", i, over, want)
					}
					got = append(got, i)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("over at acks %v, want %v", got, c.want)
			}
		})
	}
}

// TestRestartJobWaitsForTheLaunch: a restart of the job decided while
// agents of the launch are not up waits for them (AwaitLaunch), and goes
// out (Deferred) once the last is up, unless the job ended or another
// loss took the restart over meanwhile; a successor's planner has no
// launch to wait for.
func TestRestartJobWaitsForTheLaunch(t *testing.T) {
	// up is what the root steps as agents come up: AgentUp for each, then
	// LaunchUp once it gave the last its share.
	up := func(p *Planner, agents ...int) Event {
		for _, a := range agents {
			p.Step(AgentUp{Agent: a})
		}
		return LaunchUp{}
	}
	for _, c := range []struct {
		name     string
		resumed  bool
		upBefore []int   // agents up when the failure comes
		between  []Event // before the last agent comes up
		want     string  // what the last agent up brings
	}{
		{"held, then sent", false, []int{0}, []Event{AgentUp{Agent: 1}, LaunchUp{}}, "RestartJob"},
		{"every agent up already: sent at once", false, []int{0, 1, 2}, nil, ""},
		{"the job ends meanwhile: dropped", false, []int{0}, []Event{Signaled{Signal: 2}}, ""},
		{"a successor holds nothing", true, []int{0}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Job, Ranks: 3, Agents: 3, RankAgent: []int{0, 1, 2}, MaxRestarts: 3, AckTimeout: time.Second,
				Launching: true, Resumed: c.resumed})
			p.Step(up(p, c.upBefore...))
			p.Step(RankExited{Rank: 0, Incarnation: 1, Node: "n0", Signal: 9})
			first := "AwaitLaunch,Arm"
			if len(c.upBefore) == 3 || c.resumed {
				first = "RestartJob,Arm"
			}
			step(t, p, Committed{Epoch: 1, Stage: StageRestartJob}, first)
			for _, ev := range c.between {
				p.Step(ev)
			}
			acts := step(t, p, up(p, 0, 1, 2), c.want)
			if c.want != "" && !reflect.DeepEqual(acts[0], RestartJob{Epoch: 1, Restarts: 1, Deferred: true}) {
				t.Fatalf("restart: %+v", acts[0])
			}
		})
	}
}

// TestStrandedWhenEveryRankOfANodeEnded: the root says which collectives
// it waits in (Waiting); a node whose ranks all ended without joining one
// strands it and ends the job, the lowest such collective named; a node
// with a rank running, one that joined, or one whose loss is not decided
// yet strands nothing.
func TestStrandedWhenEveryRankOfANodeEnded(t *testing.T) {
	open := func(seq uint64, joined ...int) OpenCollective {
		c := OpenCollective{Seq: seq, Op: "barrier", Joined: map[int]bool{}}
		for _, j := range joined {
			c.Joined[j] = true
		}
		return c
	}
	for _, c := range []struct {
		name   string
		ended  []int // ranks that ended cleanly (two ranks per node)
		before []Event
		open   []OpenCollective
		want   *Reason
	}{
		{"every rank of n1 ended, n1 not in: stranded", []int{2, 3}, nil, []OpenCollective{open(7, 0), open(5, 0)},
			&Reason{Kind: ReasonStranded, Rank: NoRank, Node: "n1", Seq: 5, Op: "barrier"}},
		{"n1 joined", []int{2, 3}, nil, []OpenCollective{open(5, 0, 1)}, nil},
		{"a rank of n1 runs", []int{2}, nil, []OpenCollective{open(5, 0)}, nil},
		{"the job is ending", []int{2, 3}, []Event{Signaled{Signal: 15}}, []OpenCollective{open(5, 0)}, nil},
		{"nothing open", []int{2, 3}, nil, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 6, Agents: 3, RankAgent: []int{0, 0, 1, 1, 2, 2}, Nodes: []string{"n0", "n1", "n2"},
				MaxRestarts: 3, TableReady: true})
			for _, r := range c.ended {
				p.Step(RankExited{Rank: r, Incarnation: 1, Node: "n1"})
			}
			for _, ev := range c.before {
				p.Step(ev)
			}
			acts := p.Step(Waiting{Open: c.open})
			if c.want == nil {
				if len(acts) != 0 {
					t.Fatalf("stranded: %+v", acts)
				}
				return
			}
			want := []Action{Record{Why: *c.want, Node: "n1", Rank: NoRank}, Report{Why: *c.want}, Terminate{}}
			if !reflect.DeepEqual(acts, want) {
				t.Fatalf("stranded: %+v, want %+v", acts, want)
			}
		})
	}
}

// TestSuccessorLeadsOnceEveryRootChildIsSettled: a successor's planner
// leads the agents (and carries on the recovery its predecessor left, as
// LeaderChanged does) once every child of the lost root was adopted, its
// link ended, or it is being started again; once only, and a front-end's
// planner never.
func TestSuccessorLeadsOnceEveryRootChildIsSettled(t *testing.T) {
	// n0 and n1 are children of the root, n2 below n0.
	tr, err := topology.FromEdges("test", []topology.Edge{{Name: "n0", Parent: topology.Root, Backup: topology.None},
		{Name: "n1", Parent: topology.Root, Backup: topology.None}, {Name: "n2", Parent: 0, Backup: 1}})
	if err != nil {
		t.Fatal(err)
	}
	child := func(adopted, closed bool) AgentLink {
		return AgentLink{Up: true, Inc: 1, Adopted: adopted, Closed: closed}
	}
	below := AgentLink{Up: true, Inc: 1} // not a child of the root: not waited for
	for _, c := range []struct {
		name    string
		resumed bool
		restore Checkpoint
		links   []AgentLink
		want    string
	}{
		{"a child not adopted yet: not yet", true, Checkpoint{}, []AgentLink{child(true, false), child(false, false), below}, ""},
		{"every child adopted: leads", true, Checkpoint{}, []AgentLink{child(true, false), child(true, false), below}, "Leads,RefillGroup"},
		{"a child whose link ended is not waited for", true, Checkpoint{}, []AgentLink{child(true, false), child(false, true), below}, "Leads,RefillGroup"},
		{"a child being started again is not waited for", true,
			Checkpoint{Epoch: 2, Stage: StageRelaunch, Agents: []AgentRecord{{Agent: 1, Node: "n1", Incarnation: 1, Restarts: 1, Lost: true}}},
			[]AgentLink{child(true, false), child(false, false), below}, "Leads,Commit,RefillGroup"},
		{"a front-end leads from the start", false, Checkpoint{}, []AgentLink{child(true, false), child(true, false), below}, ""},
		{"a child the successor started itself is not waited for", true, Checkpoint{}, []AgentLink{child(true, false), {Inc: 1}, below}, "Leads,RefillGroup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 3, Agents: 3, RankAgent: []int{0, 1, 2}, Nodes: []string{"n0", "n1", "n2"}, MaxRestarts: 3,
				AckTimeout: time.Second, TableReady: true, Resumed: c.resumed, Tree: tr})
			p.Restore(c.restore)
			p.haveLinks(c.links)
			if !c.links[1].Up {
				p.Step(AgentUp{Agent: 1}) // started by this root, given its share
			}
			acts := step(t, p, Adopting{}, c.want)
			if c.want == "" {
				return
			}
			if want := (Leads{Epoch: c.restore.Epoch, Stage: c.restore.Stage}); acts[0] != want {
				t.Fatalf("leads %+v, want %+v", acts[0], want)
			}
			if p.Epoch() != c.restore.Epoch+1 {
				t.Fatalf("epoch %d after the leader change, want %d", p.Epoch(), c.restore.Epoch+1)
			}
			step(t, p, Adopting{}, "") // once
		})
	}
}

// TestRefillCandidate: which agent a successor that leads asks to host a
// replica in place of the lost front-end's: a child of the root it holds
// the link of, without a replica, first; else the shallowest such agent
// below an adopted child, outside the subtree of its own agent; none
// when every one hosts a replica, is not up, or is not reached. In the
// tree, n0 and n1 are children of the root; n2, n3 below n0; n4, n5 below
// n1; n6 below n2.
func TestRefillCandidate(t *testing.T) {
	adopted := AgentLink{Up: true, Inc: 1, Adopted: true}
	up := AgentLink{Up: true, Inc: 1}
	for _, c := range []struct {
		name     string
		links    []AgentLink
		replicas []int
		own      string
		want     int
	}{
		{"an adopted child of the root", []AgentLink{adopted, adopted, up, up, up, up, up}, []int{0}, "n0", 1},
		{"children host replicas: the shallowest outside its own subtree", []AgentLink{adopted, adopted, up, up, up, up, up}, []int{0, 1}, "n0", 4},
		{"its own agent deep: the shallowest elsewhere", []AgentLink{adopted, adopted, up, up, up, up, up}, []int{0, 1}, "n6", 2},
		{"not reached through an adopted child", []AgentLink{adopted, {Up: true, Inc: 1, Closed: true}, up, up, up, up, up}, []int{0}, "n0", -1},
		{"every agent down or a replica's", []AgentLink{adopted, adopted, {Inc: 1}, {Inc: 1}, up, up, {Inc: 1}}, []int{0, 1, 4, 5}, "n0", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(Config{Policy: Rank, Ranks: 7, Agents: 7, RankAgent: []int{0, 1, 2, 3, 4, 5, 6}, MaxRestarts: 3,
				Nodes: []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6"}, Tree: lossTree(t), Resumed: true,
				ReplicaHosts: c.replicas, RootNode: c.own})
			p.haveLinks(c.links)
			acts := p.Step(Adopting{})
			if got := acts[len(acts)-1]; got != (RefillGroup{Agent: c.want}) {
				t.Errorf("got %+v, want agent %d", got, c.want)
			}
		})
	}
}
