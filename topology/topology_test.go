package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("n%d", i)
	}
	return out
}

func kary(t *testing.T, k, n int) *Tree {
	t.Helper()
	kind, err := plan.ParseKind(fmt.Sprintf("kary:%d", k))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(kind, n+1, plan.Params{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := FromPlan(pl, names(n))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// check verifies the tree's invariants: parents and children agree, every
// agent that is not removed reaches the root through agents that are not
// removed, and backups are outside their agent's subtree and not its
// parent.
func check(t *testing.T, tr *Tree) {
	t.Helper()
	for a := range tr.N() {
		if tr.Removed(a) {
			continue
		}
		for _, p := range tr.Ancestors(a) {
			if tr.Removed(p) {
				t.Fatalf("agent %d reaches the root through removed %d", a, p)
			}
		}
		if !slices.Contains(tr.Children(tr.Parent(a)), a) {
			t.Fatalf("agent %d is not among its parent %d's children %v", a, tr.Parent(a), tr.Children(tr.Parent(a)))
		}
		for _, c := range tr.Children(a) {
			if tr.Parent(c) != a {
				t.Fatalf("child %d of %d has parent %d", c, a, tr.Parent(c))
			}
		}
		if b := tr.Backup(a); b != None {
			if tr.Removed(b) || b == tr.Parent(a) || tr.InSubtree(b, a) {
				t.Fatalf("agent %d: backup %d (parent %d)", a, b, tr.Parent(a))
			}
		}
	}
}

func TestFromPlan(t *testing.T) {
	tr := kary(t, 2, 10)
	// kary:2 over 11 plan nodes: the root's children are agents 0 and 1,
	// agent 0's children 2 and 3, and so on.
	if got := tr.Children(Root); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Fatalf("root children %v", got)
	}
	if got := tr.Children(0); !reflect.DeepEqual(got, []int{2, 3}) {
		t.Fatalf("children of 0: %v", got)
	}
	if tr.Top(9) != 0 && tr.Top(9) != 1 {
		t.Fatalf("top of 9: %d", tr.Top(9))
	}
	for a := range tr.N() {
		if r, ok := tr.Routes(Root)[a]; !ok || r != tr.Top(a) {
			t.Fatalf("root's route to %d: %d, top %d", a, r, tr.Top(a))
		}
		routes := tr.Routes(a)
		if len(routes) != len(tr.Subtree(a)) {
			t.Fatalf("agent %d: %d routes for a subtree of %d", a, len(routes), len(tr.Subtree(a)))
		}
		for _, s := range tr.Subtree(a) {
			if c, ok := routes[s]; !tr.InSubtree(s, a) || !ok || !slices.Contains(tr.Children(a), c) || !tr.InSubtree(s, c) {
				t.Fatalf("subtree of %d: %d routed through %d", a, s, c)
			}
		}
	}
	if tr.Backup(0) != None || tr.Backup(1) != None {
		t.Fatalf("root children have backups %d %d", tr.Backup(0), tr.Backup(1))
	}
	check(t, tr)
	// The plan's backups and the recomputed ones obey the same rule.
	tr.RecomputeBackups()
	check(t, tr)
	for a := 2; a < tr.N(); a++ {
		if tr.Backup(a) == None {
			t.Fatalf("agent %d has no backup after recomputing", a)
		}
	}
}

func TestFlat(t *testing.T) {
	tr := Flat(names(3))
	if !reflect.DeepEqual(tr.Children(Root), []int{0, 1, 2}) || tr.Top(2) != 2 || !tr.Leaf(1) || tr.LeafLauncher(Root) != true {
		t.Fatalf("flat tree: %+v", tr)
	}
	check(t, tr)
}

func TestReparentRefusesCycles(t *testing.T) {
	tr := kary(t, 2, 10)
	if err := tr.Reparent(0, 2); !errors.Is(err, ErrCycle) { // 2 is 0's child
		t.Fatalf("reparent under own child: %v", err)
	}
	if err := tr.Reparent(0, 0); !errors.Is(err, ErrCycle) {
		t.Fatalf("reparent under itself: %v", err)
	}
	if err := tr.Reparent(2, 1); err != nil {
		t.Fatal(err)
	}
	if tr.Parent(2) != 1 || slices.Contains(tr.Children(0), 2) || !slices.Contains(tr.Children(1), 2) || tr.Top(2) != 1 {
		t.Fatalf("after moving 2 under 1: parent %d, children of 0 %v, of 1 %v", tr.Parent(2), tr.Children(0), tr.Children(1))
	}
	check(t, tr)
}

func TestRemoveOrphansAndFallbacks(t *testing.T) {
	tr := kary(t, 2, 10)
	orphans, err := tr.Remove(0)
	if err != nil || !reflect.DeepEqual(orphans, []int{2, 3}) {
		t.Fatalf("remove 0: orphans %v, %v", orphans, err)
	}
	if _, err := tr.Remove(0); !errors.Is(err, ErrRemoved) {
		t.Fatalf("remove twice: %v", err)
	}
	if err := tr.Reparent(5, 0); !errors.Is(err, ErrRemoved) {
		t.Fatalf("reparent under a removed agent: %v", err)
	}
	for _, o := range orphans {
		fb := tr.Fallbacks(o)
		if len(fb) == 0 || fb[len(fb)-1] != Root || slices.Contains(fb, 0) {
			t.Fatalf("fallbacks of orphan %d: %v", o, fb)
		}
		if err := tr.Reparent(o, fb[0]); err != nil {
			t.Fatalf("orphan %d to %d: %v", o, fb[0], err)
		}
	}
	tr.RecomputeBackups()
	check(t, tr)
	if fb := tr.Fallbacks(1); !reflect.DeepEqual(fb, []int{Root}) {
		t.Fatalf("a root child falls back to the root group only: %v", fb)
	}
}

func TestAddSpare(t *testing.T) {
	tr := kary(t, 2, 4)
	a, err := tr.AddSpare("spare0", 1)
	if err != nil || a != 4 || tr.Name(a) != "spare0" || tr.Parent(a) != 1 {
		t.Fatalf("spare %d %v", a, err)
	}
	check(t, tr)
}

func TestEdgesRoundTrip(t *testing.T) {
	tr := kary(t, 3, 12)
	if _, err := tr.Remove(4); err != nil {
		t.Fatal(err)
	}
	back, err := FromEdges(tr.Kind(), tr.Edges())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Edges(), tr.Edges()) || !reflect.DeepEqual(back.Children(Root), tr.Children(Root)) {
		t.Fatalf("round trip:\n%+v\n%+v", back.Edges(), tr.Edges())
	}
	bad := tr.Edges()
	bad[1].Parent, bad[5].Parent = 5, 1
	if _, err := FromEdges("x", bad); err == nil {
		t.Fatal("a cycle was accepted")
	}
}

// TestRandomChanges applies random removals, moves and spares: the tree
// stays a tree, whatever the order.
func TestRandomChanges(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		tr := kary(t, 2+int(seed%3), 20)
		for range 30 {
			a := rng.IntN(tr.N())
			switch rng.IntN(4) {
			case 0:
				orphans, err := tr.Remove(a)
				if err != nil {
					continue
				}
				for _, o := range orphans {
					if tr.Removed(o) {
						continue
					}
					if err := tr.Reparent(o, tr.Fallbacks(o)[0]); err != nil {
						t.Fatalf("seed %d: orphan %d: %v", seed, o, err)
					}
				}
			case 1:
				p := rng.IntN(tr.N()+1) - 1
				if err := tr.Reparent(a, p); err != nil && !errors.Is(err, ErrCycle) && !errors.Is(err, ErrRemoved) {
					t.Fatalf("seed %d: %v", seed, err)
				}
			case 2:
				if !tr.Removed(a) {
					_, _ = tr.AddSpare(fmt.Sprintf("s%d", tr.N()), a)
				}
			case 3:
				tr.RecomputeBackups()
			}
			check(t, tr)
		}
	}
}

// TestReplicaAgents: the agents that host the root's replicas beyond the
// front-end's are the plan's replica nodes, as agents (plan node a+1).
func TestReplicaAgents(t *testing.T) {
	kind, err := plan.ParseKind("kary:2")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := plan.Build(kind, 8, plan.Params{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := ReplicaAgents(pl)
	if len(got) != 2 {
		t.Fatalf("%v, want 2 agents", got)
	}
	for _, v := range pl.ReplicaNodes[1:] {
		if !got[int(v)-1] {
			t.Errorf("replica node %d (agent %d) missing from %v", v, v-1, got)
		}
	}
	one, err := plan.Build(kind, 8, plan.Params{Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := ReplicaAgents(one); len(got) != 0 {
		t.Errorf("one replica (the front-end's): %v", got)
	}
}

// TestMoveRoutes: an agent's move names the agents that moved (it and its
// subtree) and the routes its new ancestors learn, from the top down.
func TestMoveRoutes(t *testing.T) {
	// n0 ─ n1 ─ n2 ─ n3 ─ n4; n5 below the root.
	tr, err := FromEdges("test", []Edge{
		{Name: "n0", Parent: Root, Backup: None},
		{Name: "n1", Parent: 0, Backup: None},
		{Name: "n2", Parent: 1, Backup: None},
		{Name: "n3", Parent: 2, Backup: None},
		{Name: "n4", Parent: 3, Backup: None},
		{Name: "n5", Parent: Root, Backup: None},
	})
	if err != nil {
		t.Fatal(err)
	}
	moved, routes := tr.MoveRoutes(3)
	if !slices.Equal(moved, []int{3, 4}) {
		t.Errorf("moved %v, want [3 4]", moved)
	}
	if want := []Route{{At: 0, Via: 1}, {At: 1, Via: 2}, {At: 2, Via: 3}}; !slices.Equal(routes, want) {
		t.Errorf("routes %v, want %v", routes, want)
	}
	if moved, routes := tr.MoveRoutes(5); !slices.Equal(moved, []int{5}) || len(routes) != 0 {
		t.Errorf("a child of the root: moved %v, routes %v", moved, routes)
	}
}
