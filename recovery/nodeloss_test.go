package recovery

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/topology"
)

// The tree of these tests:
//
//	root ─ n0 ─ n2 ─ n6      backups: n2, n3 → n1; n4, n5 → n0; n6 → n3
//	     │    └ n3
//	     └ n1 ─ n4
//	          └ n5
func lossTree(t *testing.T) *topology.Tree {
	t.Helper()
	tr, err := topology.FromEdges("test", []topology.Edge{
		{Name: "n0", Parent: topology.Root, Backup: topology.None},
		{Name: "n1", Parent: topology.Root, Backup: topology.None},
		{Name: "n2", Parent: 0, Backup: 1},
		{Name: "n3", Parent: 0, Backup: 1},
		{Name: "n4", Parent: 1, Backup: 0},
		{Name: "n5", Parent: 1, Backup: 0},
		{Name: "n6", Parent: 2, Backup: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

const orphanWait = 6 * time.Second

func lossPlanner(t *testing.T, policy Policy) *Planner {
	t.Helper()
	return New(Config{Policy: policy, Ranks: 7, Agents: 7, RankAgent: []int{0, 1, 2, 3, 4, 5, 6}, MaxRestarts: 3,
		AckTimeout: time.Second, Nodes: []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6"},
		Tree: lossTree(t), OrphanWait: orphanWait, Up: allUp(7)})
}

// lossPlannerLinks is lossPlanner with every agent up, as the root knows
// them, but for what links changes (nil: nothing).
func lossPlannerLinks(t *testing.T, policy Policy, links func([]AgentLink)) *Planner {
	t.Helper()
	p := lossPlanner(t, policy)
	ls := upLinks()
	if links != nil {
		links(ls)
	}
	p.haveLinks(ls)
	return p
}

// upLinks is every agent of lossTree up, as the root knows them.
func upLinks() []AgentLink {
	ls := make([]AgentLink, 7)
	for i := range ls {
		ls[i] = AgentLink{Up: true, Inc: 1}
	}
	return ls
}

func fence(a int) Fence {
	return Fence{Agent: a, Node: "n" + string(rune('0'+a)), Incarnation: 1}
}

// nodeLossActs keeps the node-loss actions of acts (the planner's
// AgentLost decisions follow Lost: TestSubtreeLossTakenPerAgent).
func nodeLossActs(acts []Action) []Action {
	var out []Action
	for _, a := range acts {
		switch a.(type) {
		case LoseSubtree, Fence, AwaitOrphans, OrphanLate, OrphansArrived, Redeal, Lost, Moved, MoveIgnored, MoveFailed:
			out = append(out, a)
		}
	}
	return out
}

// TestOrphanChoice: which children of a lost agent are orphans on their
// way to a new parent, which are lost with it, and how long the planner
// waits for them.
func TestOrphanChoice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy Policy
		before []Event
		links  func([]AgentLink)
		want   []Action
	}{
		{name: "children with a live backup are orphans", policy: Rank,
			want: []Action{
				LoseSubtree{Closed: []int{0}, Lost: []int{0}, Abandoned: []int{0}}, fence(0),
				AwaitOrphans{Loss: 1, Agent: 0, Wait: orphanWait, Moves: []OrphanMove{
					{Orphan: 2, Backup: 1, Switch: true}, {Orphan: 3, Backup: 1, Switch: true}}},
			}},
		{name: "no restart policy: the subtree is lost", policy: None,
			want: []Action{
				LoseSubtree{Closed: []int{0, 2, 6, 3}, Lost: []int{0, 2, 6, 3}, Abandoned: []int{0, 2, 6, 3}}, fence(0), fence(2), fence(6), fence(3),
				Lost{Agent: 0, Agents: []int{0, 2, 6, 3}, Err: "gone", Running: true},
			}},
		{name: "a child not up is lost with it", policy: Rank,
			links: func(ls []AgentLink) { ls[3].Up = false },
			want: []Action{
				LoseSubtree{Closed: []int{0, 3}, Lost: []int{0, 3}, Abandoned: []int{0, 3}}, fence(0), fence(3),
				AwaitOrphans{Loss: 1, Agent: 0, Wait: orphanWait, Moves: []OrphanMove{{Orphan: 2, Backup: 1, Switch: true}}},
			}},
		{name: "a lost agent that was done has no orphans", policy: Rank,
			links: func(ls []AgentLink) { ls[0].Done = true },
			want: []Action{
				LoseSubtree{Closed: []int{0, 2, 6, 3}, Lost: []int{2, 6, 3}, Abandoned: []int{2, 6, 3}}, fence(2), fence(6), fence(3),
				Redeal{Lost: []int{2, 6, 3}, Rerooted: []int{2, 6, 3}, Tell: []int{4, 5}},
				Lost{Agent: 0, Agents: []int{2, 6, 3}, Err: "gone", Running: true},
			}},
		{name: "a job that ends moves no agent", policy: Rank,
			before: []Event{Signaled{Signal: 15}},
			want: []Action{
				LoseSubtree{Closed: []int{0, 2, 6, 3}, Lost: []int{0, 2, 6, 3}, Abandoned: []int{0, 2, 6, 3}, Ending: true}, fence(0), fence(2), fence(6), fence(3),
				Lost{Agent: 0, Agents: []int{0, 2, 6, 3}, Err: "gone"},
			}},
		{name: "a link that ended already is not lost twice", policy: Rank,
			links: func(ls []AgentLink) { ls[0].Closed = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlanner(t, tc.policy)
			for _, ev := range tc.before {
				p.Step(ev)
			}
			ls := upLinks()
			if tc.links != nil {
				tc.links(ls)
			}
			p.haveLinks(ls)
			got := nodeLossActs(p.Step(LinkLost{Agent: 0, Err: "gone"}))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestFallbackWait: an orphan whose backup is lost too tries its fallback
// parents (its grandparent, the root): it is waited for FallbackWait
// longer; one with no fallback that can take it is lost.
func TestFallbackWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fallbacks []int
		want      []Action
	}{
		{name: "the root among its fallbacks", fallbacks: []int{topology.Root},
			want: []Action{
				LoseSubtree{Closed: []int{2}, Lost: []int{2}, Abandoned: []int{2}}, fence(2),
				AwaitOrphans{Loss: 1, Agent: 2, Wait: orphanWait + FallbackWait, Moves: []OrphanMove{{Orphan: 6, Backup: 3, Fallback: true}}},
			}},
		{name: "a live grandparent among its fallbacks", fallbacks: []int{0},
			want: []Action{
				LoseSubtree{Closed: []int{2}, Lost: []int{2}, Abandoned: []int{2}}, fence(2),
				AwaitOrphans{Loss: 1, Agent: 2, Wait: orphanWait + FallbackWait, Moves: []OrphanMove{{Orphan: 6, Backup: 3, Fallback: true}}},
			}},
		{name: "no fallback told: lost with its parent",
			want: []Action{
				LoseSubtree{Closed: []int{2, 6}, Lost: []int{2, 6}, Abandoned: []int{2, 6}}, fence(2), fence(6),
				Redeal{Lost: []int{2, 6}, Rerooted: []int{2, 6}, Tell: []int{3, 4, 5}},
				Lost{Agent: 2, Agents: []int{2, 6}, Err: "gone", Running: true},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			ls := upLinks()
			ls[3].Closed = true // n6's backup is gone
			ls[6].Fallbacks = tc.fallbacks
			p.haveLinks(ls)
			got := nodeLossActs(p.Step(LinkLost{Agent: 2, Err: "gone"}))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestOrphanArrival: the loss is taken once every orphan has its new
// parent: the tree has the new edges, the lost agent starts again as a
// child of the root, and backups are dealt again.
func TestOrphanArrival(t *testing.T) {
	p := lossPlanner(t, Rank)
	at := time.Unix(100, 0)
	p.Step(LinkLost{Agent: 2, Err: "gone", At: at})
	got := nodeLossActs(p.Step(Reparented{Agent: 6, Parent: 3, Incarnation: 1}))
	want := []Action{
		Moved{Agent: 6, From: 2, To: 3},
		OrphansArrived{Agent: 2, Since: at},
		Redeal{Lost: []int{2}, Rerooted: []int{2}, Tell: []int{3, 4, 5, 6}},
		Lost{Agent: 2, Agents: []int{2}, Err: "gone", Running: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	tr := p.cfg.Tree
	if tr.Parent(6) != 3 || tr.Parent(2) != topology.Root {
		t.Fatalf("tree: n6 under %d, n2 under %d", tr.Parent(6), tr.Parent(2))
	}
	for a := range 7 {
		if b := tr.Backup(a); b != topology.None && (b == tr.Parent(a) || tr.InSubtree(b, a)) {
			t.Fatalf("agent %d dealt backup %d: its parent or below it", a, b)
		}
	}
	// A second report of the same move changes nothing more.
	if got := p.Step(Reparented{Agent: 6, Parent: 3, Incarnation: 1}); kinds(got) != "Moved" || got[0].(Moved).From != 3 {
		t.Fatalf("again: %+v", got)
	}
}

// TestOrphanLate: an orphan that did not reach a new parent in time is
// lost with the agent, with the agents below it.
func TestOrphanLate(t *testing.T) {
	p := lossPlanner(t, Rank)
	acts := p.Step(LinkLost{Agent: 0, Err: "gone"})
	aw := acts[len(acts)-1].(AwaitOrphans)
	p.Step(Reparented{Agent: 3, Parent: 1, Incarnation: 1})
	got := nodeLossActs(p.Step(OrphansDue{Loss: aw.Loss}))
	want := []Action{
		OrphanLate{Orphan: 2, Agent: 0},
		LoseSubtree{Closed: []int{2, 6}, Lost: []int{2, 6}, Abandoned: []int{2, 6}}, fence(2), fence(6),
		Redeal{Lost: []int{0, 2, 6}, Rerooted: []int{2, 6}, Tell: []int{3, 4, 5}},
		Lost{Agent: 0, Agents: []int{0, 2, 6}, Err: "gone", Running: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got := p.Step(OrphansDue{Loss: aw.Loss}); got != nil {
		t.Fatalf("a loss taken already is due again: %+v", got)
	}
}

// TestOrphanMoveOfLostIncarnation: a new parent reported for an agent
// declared lost (or for an older incarnation) is ignored; a move to
// another than the backup is to a fallback.
func TestOrphanMoveOfLostIncarnation(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   Reparented
		want Action
	}{
		{name: "to its backup", ev: Reparented{Agent: 2, Parent: 1, Incarnation: 1}, want: Moved{Agent: 2, From: 0, To: 1}},
		{name: "to a fallback", ev: Reparented{Agent: 6, Parent: 0, Incarnation: 1}, want: Moved{Agent: 6, From: 2, To: 0, Fallback: true}},
		{name: "to the root", ev: Reparented{Agent: 6, Parent: topology.Root, Incarnation: 1}, want: Moved{Agent: 6, From: 2, To: topology.Root}},
		{name: "an older incarnation", ev: Reparented{Agent: 2, Parent: 1, Incarnation: 2}, want: MoveIgnored{Agent: 2, Parent: 1, Incarnation: 2}},
		{name: "declared lost", ev: Reparented{Agent: 4, Parent: 0, Incarnation: 1}, want: MoveIgnored{Agent: 4, Parent: 0, Incarnation: 1}},
		{name: "under its own subtree", ev: Reparented{Agent: 2, Parent: 6, Incarnation: 1}, want: MoveFailed{Agent: 2, Parent: 6, Err: "move n2 under n6: topology: the new parent is in the agent's own subtree"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlanner(t, Rank)
			ls := upLinks()
			ls[4].Closed = true
			p.haveLinks(ls)
			if got := p.Step(tc.ev); !reflect.DeepEqual(got, []Action{tc.want}) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestOrphanAdoptionUndone: a move to the root the tree cannot take (the
// agent is no longer in it) undoes the root's adoption of the agent; the
// root adopted nothing for a move to another agent.
func TestOrphanAdoptionUndone(t *testing.T) {
	p := lossPlanner(t, Rank)
	ls := upLinks()
	ls[6].Adopted = true
	p.haveLinks(ls)
	if _, err := p.cfg.Tree.Remove(6); err != nil {
		t.Fatal(err)
	}
	got := p.Step(Reparented{Agent: 6, Parent: topology.Root, Incarnation: 1})
	if mf, ok := got[0].(MoveFailed); len(got) != 1 || !ok || !mf.Undo || mf.Agent != 6 {
		t.Fatalf("to the root: %+v, want a MoveFailed that undoes the adoption", got)
	}
	got = p.Step(Reparented{Agent: 6, Parent: 0, Incarnation: 1})
	if mf, ok := got[0].(MoveFailed); len(got) != 1 || !ok || mf.Undo {
		t.Fatalf("to n0: %+v, want a MoveFailed that undoes nothing", got)
	}
}

// TestSubtreeLossPendingStrandsNothing: a node whose agent's loss waits
// for its orphans is not stranded: its ranks' end is not final.
func TestSubtreeLossPendingStrandsNothing(t *testing.T) {
	p := lossPlanner(t, Rank)
	p.Step(LinkLost{Agent: 0, Err: "gone"})
	if got := p.Step(Stranded{Seq: 3, Agent: 0, Node: "n0", Op: "barrier"}); got != nil {
		t.Fatalf("stranded during the loss: %+v", got)
	}
	if got := kinds(p.Step(Stranded{Seq: 3, Agent: 5, Node: "n5", Op: "barrier"})); got != "Record,Report,Terminate" {
		t.Fatalf("stranded elsewhere: %s", got)
	}
}

// TestFenceEveryLostAgent: every agent lost is fenced once, by the
// incarnation the root holds; one that said it was done is not.
func TestFenceEveryLostAgent(t *testing.T) {
	p := lossPlanner(t, None)
	ls := upLinks()
	ls[2].Inc = 3
	ls[6].Done = true
	p.haveLinks(ls)
	var fences []Action
	for _, a := range p.Step(LinkLost{Agent: 0, Err: "gone"}) {
		if f, ok := a.(Fence); ok {
			fences = append(fences, f)
		}
	}
	want := []Action{fence(0), Fence{Agent: 2, Node: "n2", Incarnation: 3}, fence(3)}
	if !reflect.DeepEqual(fences, want) {
		t.Fatalf("got %+v, want %+v", fences, want)
	}
}

// TestOrphanAdoption: whether the root adopts an agent that asks it. An
// orphan (its parent and backup lost: the root is its last fallback
// parent) only under a restart policy with a launch tree, an incarnation
// the root holds as up and not lost, while the job is not ending; a child
// of a lost root by a successor once per incarnation, not one being
// replaced. A refused incarnation declared lost is told so (Fenced).
func TestOrphanAdoption(t *testing.T) {
	orphan := AdoptAsked{Agent: 6, Incarnation: 2, Known: true}
	child := AdoptAsked{Agent: 1, Incarnation: 2, Known: true} // of the root (lossTree)
	with := func(ev AdoptAsked, f func(*AdoptAsked)) AdoptAsked { f(&ev); return ev }
	for _, c := range []struct {
		name   string
		policy Policy
		noTree bool
		ending bool
		link   func(*AgentLink) // the root's link to the asking agent (up, incarnation 2) as it stands
		ev     AdoptAsked
		want   Action
	}{
		{"orphan adopted", Rank, false, false, nil, orphan, Adopt{Agent: 6, Incarnation: 2, Orphan: true}},
		{"orphan, no restart policy", None, false, false, nil, orphan, RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseNoRecovery}},
		{"orphan, no tree", Job, true, false, nil, orphan, RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseNoRecovery}},
		{"orphan, an older incarnation", Rank, false, false, nil, with(orphan, func(e *AdoptAsked) { e.Incarnation = 1 }),
			RefuseAdoption{Agent: 6, Incarnation: 1, Why: RefuseDeclaredLost, Fenced: true}},
		{"orphan, its link closed", Rank, false, false, func(l *AgentLink) { l.Closed = true }, orphan,
			RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseDeclaredLost, Fenced: true}},
		{"orphan, not up", Rank, false, false, func(l *AgentLink) { l.Up = false }, orphan,
			RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseNotUp}},
		{"orphan, the job ends", Rank, false, true, nil, orphan, RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseEnding}},
		{"not one of the job's", Rank, false, false, nil, with(orphan, func(e *AdoptAsked) { e.Known = false }),
			RefuseAdoption{Agent: 6, Incarnation: 2, Why: RefuseUnknown}},
		{"child of the lost root", Rank, false, false, nil, child, Adopt{Agent: 1, Incarnation: 2}},
		{"child of the lost root, adopted already", Rank, false, false, func(l *AgentLink) { l.Adopted = true }, child,
			RefuseAdoption{Agent: 1, Incarnation: 2, Why: RefuseTaken}},
		{"child of the lost root, started by the successor", Rank, false, false, nil, with(child, func(e *AdoptAsked) { e.Linked = true }),
			RefuseAdoption{Agent: 1, Incarnation: 2, Why: RefuseTaken}},
		{"child of the lost root, an older incarnation", Rank, false, false, nil, with(child, func(e *AdoptAsked) { e.Incarnation = 1 }),
			RefuseAdoption{Agent: 1, Incarnation: 1, Why: RefuseTaken, Fenced: true}},
		{"child of the lost root, its link closed", Rank, false, false, func(l *AgentLink) { l.Closed = true }, child,
			RefuseAdoption{Agent: 1, Incarnation: 2, Why: RefuseTaken, Fenced: true}},
		{"child of the lost root, done", Rank, false, false, func(l *AgentLink) { l.Closed, l.Done = true, true }, child,
			RefuseAdoption{Agent: 1, Incarnation: 2, Why: RefuseTaken}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := lossPlanner(t, c.policy)
			l := AgentLink{Up: true, Inc: 2}
			if c.link != nil {
				c.link(&l)
			}
			p.haveLink(c.ev.Agent, l)
			if c.noTree {
				p.cfg.Tree = nil
			}
			if c.ending {
				p.Step(TimedOut{Limit: time.Second})
			}
			acts := p.Step(c.ev)
			if r, ok := acts[0].(RefuseAdoption); ok {
				r.Held = nil // TestRefusedAdoptionSaidOnce
				acts[0] = r
			}
			if len(acts) != 1 || !reflect.DeepEqual(acts[0], c.want) {
				t.Errorf("actions %v, want %v", acts, c.want)
			}
		})
	}
}

// TestRefusedAdoptionSaidOnce: a refusal whose reason has no words says
// how the root holds the agent of that index, once per incarnation that
// asks (a refused agent asks again and again); one with words says them.
func TestRefusedAdoptionSaidOnce(t *testing.T) {
	p := lossPlanner(t, Rank)
	p.haveLink(1, AgentLink{Up: true, Inc: 2, Adopted: true})
	ask := func(inc uint64) RefuseAdoption {
		return p.Step(AdoptAsked{Agent: 1, Incarnation: inc, Known: true, Name: "n1"})[0].(RefuseAdoption)
	}
	name := func(i int) string { return fmt.Sprintf("n%d", i) }
	first := ask(2)
	if want := (AdoptionHeld{Name: "n1", Incarnation: 1, RootChild: true, Adopted: true}); first.Held == nil || *first.Held != want {
		t.Fatalf("first refusal holds %+v, want %+v", first.Held, want)
	}
	if w, _ := Narrate(first, name, nil); w != "refused to adopt node n1 (agent 1, incarnation 2; this root has n1, incarnation 1, child of the root true, adopted true, lost false)" {
		t.Errorf("words %q", w)
	}
	if again := ask(2); again.Held != nil {
		t.Errorf("said again: %+v", again.Held)
	}
	if next := ask(3); next.Held == nil {
		t.Error("another incarnation's refusal not said")
	}
	p.haveLink(6, AgentLink{Up: true, Inc: 2})
	orphan := p.Step(AdoptAsked{Agent: 6, Incarnation: 1, Known: true, Name: "n6"})[0].(RefuseAdoption)
	if w, _ := Narrate(orphan, name, nil); orphan.Held != nil || w != "recovery: refused to adopt node n6 (incarnation 1): it was declared lost" {
		t.Errorf("refusal with words: %q, held %+v", w, orphan.Held)
	}
}

// TestSubtreeLostWithItsAgent: which agents a loss closes and loses
// (LoseSubtree), and where the lost ones go in the tree: the lost agent's
// subtree but for its orphans and what is below them; an orphan that does
// not arrive in time is lost with what is below it; an agent that was done
// is closed, not lost; every lost agent starts again as a child of the
// root.
func TestSubtreeLostWithItsAgent(t *testing.T) {
	for _, tc := range []struct {
		name       string
		policy     Policy
		lost       int
		links      func([]AgentLink)
		due        bool // the orphans' wait passes before any arrives
		wantClosed []int
		wantLost   []int
		wantRoot   []int // children of the root once the loss is taken
	}{
		{name: "a leaf: itself", policy: Rank, lost: 6,
			wantClosed: []int{6}, wantLost: []int{6}, wantRoot: []int{0, 1, 6}},
		{name: "interior, no restart policy: its whole subtree", policy: None, lost: 0,
			wantClosed: []int{0, 2, 6, 3}, wantLost: []int{0, 2, 6, 3}, wantRoot: []int{0, 1}},
		{name: "interior: its orphans and their subtrees are kept", policy: Rank, lost: 0,
			wantClosed: []int{0}, wantLost: []int{0}},
		{name: "interior, its orphans late: lost with their subtrees", policy: Rank, lost: 0, due: true,
			wantClosed: []int{0, 2, 6, 3}, wantLost: []int{0, 2, 6, 3}, wantRoot: []int{0, 1, 2, 6, 3}},
		{name: "an agent below that was done is closed, not lost", policy: None, lost: 2,
			links:      func(ls []AgentLink) { ls[6].Done = true },
			wantClosed: []int{2, 6}, wantLost: []int{2}, wantRoot: []int{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlannerLinks(t, tc.policy, tc.links)
			acts := p.Step(LinkLost{Agent: tc.lost, Err: "gone"})
			if tc.due {
				for _, a := range acts {
					if aw, ok := a.(AwaitOrphans); ok {
						acts = append(acts, p.Step(OrphansDue{Loss: aw.Loss})...)
					}
				}
			}
			var closed, lost []int
			for _, a := range acts {
				if s, ok := a.(LoseSubtree); ok {
					closed, lost = append(closed, s.Closed...), append(lost, s.Lost...)
				}
			}
			if !reflect.DeepEqual(closed, tc.wantClosed) || !reflect.DeepEqual(lost, tc.wantLost) {
				t.Fatalf("closed %v lost %v, want %v %v (%+v)", closed, lost, tc.wantClosed, tc.wantLost, acts)
			}
			if tc.wantRoot != nil {
				if got := p.cfg.Tree.Children(topology.Root); !reflect.DeepEqual(got, tc.wantRoot) {
					t.Fatalf("children of the root %v, want %v", got, tc.wantRoot)
				}
			}
		})
	}
}

// TestSubtreeLossTakenPerAgent: once a loss is settled, the planner takes
// each lost agent's loss itself (Lost, then an AgentLost decision per
// agent, the first agent's own, the others' lost with it), at the
// incarnation of the root's link to it; the ranks of the lost agents are
// counted as ended when their subtree is closed (LoseSubtree.Abandoned),
// and run again for the ledger if their agent starts again.
func TestSubtreeLossTakenPerAgent(t *testing.T) {
	type record struct {
		kind    ReasonKind
		node    string
		with    string
		nextInc uint64
	}
	for _, tc := range []struct {
		name    string
		policy  Policy
		links   func([]AgentLink)
		lose    LinkLost
		running bool
		records []record
		ended   []int
	}{
		{name: "no restart policy: the first loss ends the job", policy: None,
			lose:    LinkLost{Agent: 2, Err: "gone"},
			running: true,
			records: []record{{kind: ReasonAgentLost, node: "n2"}},
			ended:   []int{2, 6}},
		{name: "an interior agent and the one below it start again, each once", policy: Rank,
			links:   func(ls []AgentLink) { ls[3].Closed = true; ls[6].Fallbacks = nil }, // n6 has nowhere to go
			lose:    LinkLost{Agent: 2, Err: "gone"},
			running: true,
			records: []record{{kind: ReasonAgentRelaunch, node: "n2", nextInc: 2}, {kind: ReasonAgentRelaunch, node: "n6", with: "n2", nextInc: 2}}},
		{name: "at the incarnation of the root's link", policy: Rank,
			links:   func(ls []AgentLink) { ls[4].Inc = 3 },
			lose:    LinkLost{Agent: 4, Err: "gone"},
			running: true,
			records: []record{{kind: ReasonAgentRelaunch, node: "n4", nextInc: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := lossPlannerLinks(t, tc.policy, tc.links)
			acts := p.Step(tc.lose)
			var lost *Lost
			var got []record
			for _, a := range acts {
				switch a := a.(type) {
				case Lost:
					lost = &a
				case Record:
					if lost == nil {
						t.Fatalf("a decision on a lost agent before the loss was told: %s", kinds(acts))
					}
					got = append(got, record{kind: a.Why.Kind, node: a.Why.Node, with: a.Why.With, nextInc: a.Why.Incarnation})
				}
			}
			if lost == nil || lost.Running != tc.running {
				t.Fatalf("lost %+v in %s, want running %v", lost, kinds(acts), tc.running)
			}
			if !reflect.DeepEqual(got, tc.records) {
				t.Fatalf("records %+v\nwant    %+v", got, tc.records)
			}
			if ended := ranksWhere(7, p.Ledger().Ended); !reflect.DeepEqual(ended, tc.ended) {
				t.Fatalf("ended %v, want %v", ended, tc.ended)
			}
		})
	}
}
