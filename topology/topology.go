// Package topology is the job's launch tree as the root, the agents'
// relays and a successor root see it: one Tree over the job's agents, built
// from a launch plan and able to change — an agent removed, a child moved
// to another parent, a spare added, backups computed again — so that a
// tree that heals itself has one representation to change.
//
// Agents are numbered 0..N()-1 in plan order (agent a is plan node a+1);
// the root (the front-end, or a successor in its place) is Root. A Tree is
// a plain value with no goroutines or I/O; it is not safe for concurrent
// use: its owner (the root's event loop) serializes access.
package topology

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// Root stands for the root of the tree: the parent of its top agents.
const Root = -1

// None is "no agent": the backup of an agent whose fallback is the root
// group (a child of the root), or of an agent with no candidate.
const None = -2

// Tree is the launch tree. The zero value is an empty tree.
type Tree struct {
	kind     string
	names    []string
	parent   []int
	backup   []int
	children [][]int // in launch order
	gone     []bool
	childs0  []int // the root's children, in launch order
}

// FromPlan makes the tree of a plan over the root (plan node 0) and the
// named agents (plan node a+1).
func FromPlan(pl *plan.Plan, names []string) (*Tree, error) {
	if pl.N() != len(names)+1 {
		return nil, fmt.Errorf("topology: plan of %d nodes for %d agents", pl.N(), len(names))
	}
	t := newTree(pl.Kind.String(), names)
	for a := range names {
		v := a + 1
		t.parent[a] = int(pl.Parent[v]) - 1 // plan node 0 is Root
		if b := pl.Backup[v]; b > 0 {
			t.backup[a] = int(b) - 1
		}
		for _, c := range pl.Children(v) {
			t.children[a] = append(t.children[a], int(c)-1)
		}
	}
	for _, c := range pl.Children(0) {
		t.childs0 = append(t.childs0, int(c)-1)
	}
	return t, nil
}

// ReplicaAgents are the agents (of a tree FromPlan builds from pl) that
// host root replicas, beyond the front-end's own.
func ReplicaAgents(pl *plan.Plan) map[int]bool {
	out := map[int]bool{}
	for _, v := range pl.ReplicaNodes[1:] {
		out[int(v)-1] = true
	}
	return out
}

// Flat is the tree of agents that are all children of the root, in order,
// with no backups: the front-end starts them all.
func Flat(names []string) *Tree {
	t := newTree("flat", names)
	for a := range names {
		t.parent[a] = Root
		t.childs0 = append(t.childs0, a)
	}
	return t
}

// Edge is one agent's place, as the replicated state records it.
type Edge struct {
	Name    string
	Parent  int // Root, or an agent
	Backup  int // None, or an agent
	Removed bool
}

// FromEdges rebuilds a tree from its agents' edges (a successor root, from
// the replicated state). Children keep the order of the edges.
func FromEdges(kind string, edges []Edge) (*Tree, error) {
	names := make([]string, len(edges))
	for i, e := range edges {
		names[i] = e.Name
	}
	t := newTree(kind, names)
	for a, e := range edges {
		if e.Parent != Root && (e.Parent < 0 || e.Parent >= len(edges) || e.Parent == a) {
			return nil, fmt.Errorf("topology: agent %s: parent %d out of range", e.Name, e.Parent)
		}
		if e.Backup != None && (e.Backup < 0 || e.Backup >= len(edges)) {
			return nil, fmt.Errorf("topology: agent %s: backup %d out of range", e.Name, e.Backup)
		}
		t.parent[a], t.backup[a], t.gone[a] = e.Parent, e.Backup, e.Removed
		if e.Parent == Root {
			t.childs0 = append(t.childs0, a)
		} else {
			t.children[e.Parent] = append(t.children[e.Parent], a)
		}
	}
	for a := range edges { // a cycle never reaches the root
		seen := 0
		for p := t.parent[a]; p != Root; p = t.parent[p] {
			if seen++; seen > len(edges) {
				return nil, fmt.Errorf("topology: agent %s is in a cycle", edges[a].Name)
			}
		}
	}
	return t, nil
}

func newTree(kind string, names []string) *Tree {
	n := len(names)
	t := &Tree{
		kind: kind, names: slices.Clone(names),
		parent: make([]int, n), backup: make([]int, n), children: make([][]int, n), gone: make([]bool, n),
	}
	for a := range t.backup {
		t.backup[a] = None
	}
	return t
}

// Edges is the tree as the replicated state records it.
func (t *Tree) Edges() []Edge {
	out := make([]Edge, len(t.names))
	for a := range out {
		out[a] = Edge{Name: t.names[a], Parent: t.parent[a], Backup: t.backup[a], Removed: t.gone[a]}
	}
	return out
}

// Kind is the plan's kind ("flat", "kary:2", …).
func (t *Tree) Kind() string { return t.kind }

// N is the number of agents, removed ones included.
func (t *Tree) N() int { return len(t.names) }

// Name is agent a's node name.
func (t *Tree) Name(a int) string { return t.names[a] }

// Parent is agent a's parent: Root or an agent.
func (t *Tree) Parent(a int) int { return t.parent[a] }

// Backup is agent a's backup parent, or None.
func (t *Tree) Backup(a int) int { return t.backup[a] }

// Removed reports whether agent a was removed from the tree.
func (t *Tree) Removed(a int) bool { return t.gone[a] }

// Children are the children of agent a (Root: the root's), in launch
// order. The slice is the tree's: do not change it.
func (t *Tree) Children(a int) []int {
	if a == Root {
		return t.childs0
	}
	return t.children[a]
}

// Top is the ancestor of agent a among the root's children (a itself for
// one of them): the link through which the root reaches a.
func (t *Tree) Top(a int) int {
	for t.parent[a] != Root {
		a = t.parent[a]
	}
	return a
}

// Depth is agent a's depth: 1 for a child of the root.
func (t *Tree) Depth(a int) int {
	d := 1
	for p := t.parent[a]; p != Root; p = t.parent[p] {
		d++
	}
	return d
}

// Ancestors are agent a's parent, its parent's parent, …, up to a child of
// the root (the root itself is not listed).
func (t *Tree) Ancestors(a int) []int {
	var out []int
	for p := t.parent[a]; p != Root; p = t.parent[p] {
		out = append(out, p)
	}
	return out
}

// Route is a route agent At learns: the agents of a subtree below it are
// reached through its child Via.
type Route struct{ At, Via int }

// MoveRoutes is what agent a's move to a new parent means: the agents
// that moved (a and its subtree), and the routes to them its new
// ancestors learn, from the top down, so that a message for a moved agent
// travels only through ancestors that know the way already.
func (t *Tree) MoveRoutes(a int) (moved []int, routes []Route) {
	anc := t.Ancestors(a)
	for i := len(anc) - 1; i >= 0; i-- {
		via := a
		if i > 0 {
			via = anc[i-1]
		}
		routes = append(routes, Route{At: anc[i], Via: via})
	}
	return append([]int{a}, t.Subtree(a)...), routes
}

// Subtree lists the agents below agent a (not a itself), depth first, in
// launch order.
func (t *Tree) Subtree(a int) []int {
	var out []int
	var walk func(int)
	walk = func(v int) {
		for _, c := range t.Children(v) {
			out = append(out, c)
			walk(c)
		}
	}
	walk(a)
	return out
}

// InSubtree reports whether agent x is a or below it.
func (t *Tree) InSubtree(x, a int) bool {
	for ; x != Root; x = t.parent[x] {
		if x == a {
			return true
		}
	}
	return a == Root
}

// Leaf reports whether agent a starts no children.
func (t *Tree) Leaf(a int) bool { return len(t.Children(a)) == 0 }

// LeafLauncher reports whether agent a starts children and none of them
// starts any.
func (t *Tree) LeafLauncher(a int) bool {
	for _, c := range t.Children(a) {
		if !t.Leaf(c) {
			return false
		}
	}
	return !t.Leaf(a)
}

// Routes tells agent a (or the root) through which of its children each
// agent below it is reached: destination → child.
func (t *Tree) Routes(a int) map[int]int {
	out := map[int]int{}
	for _, c := range t.Children(a) {
		out[c] = c
		for _, s := range t.Subtree(c) {
			out[s] = c
		}
	}
	return out
}

// Errors of the changes.
var (
	ErrRemoved = errors.New("topology: agent removed")
	ErrCycle   = errors.New("topology: the new parent is in the agent's own subtree")
)

// Reparent moves agent a (with its subtree) under parent p (Root or an
// agent). It refuses a removed agent or parent, and a parent that is a or
// below it.
func (t *Tree) Reparent(a, p int) error {
	if err := t.check(a); err != nil {
		return err
	}
	if p != Root {
		if err := t.check(p); err != nil {
			return err
		}
		if t.InSubtree(p, a) {
			return fmt.Errorf("move %s under %s: %w", t.names[a], t.names[p], ErrCycle)
		}
	}
	old := t.parent[a]
	t.setChildren(old, slices.DeleteFunc(slices.Clone(t.Children(old)), func(c int) bool { return c == a }))
	t.setChildren(p, append(slices.Clone(t.Children(p)), a))
	t.parent[a] = p
	t.dropInvalidBackups()
	return nil
}

// dropInvalidBackups clears every backup that a change made wrong: the
// agent's parent, or one of its own subtree (an agent moved below it).
// RecomputeBackups gives them new ones.
func (t *Tree) dropInvalidBackups() {
	for a, b := range t.backup {
		if b != None && (t.gone[b] || b == t.parent[a] || t.InSubtree(b, a)) {
			t.backup[a] = None
		}
	}
}

// Remove takes agent a out of the tree: it is gone, and so is every link
// to it. It returns its children, now orphans: they keep a as their
// parent until they are moved (Reparent) or removed in turn.
func (t *Tree) Remove(a int) ([]int, error) {
	if err := t.check(a); err != nil {
		return nil, err
	}
	t.gone[a] = true
	p := t.parent[a]
	t.setChildren(p, slices.DeleteFunc(slices.Clone(t.Children(p)), func(c int) bool { return c == a }))
	t.dropInvalidBackups()
	return slices.Clone(t.children[a]), nil
}

// AddSpare adds a new agent named name under parent p and returns its
// number.
func (t *Tree) AddSpare(name string, p int) (int, error) {
	if p != Root {
		if err := t.check(p); err != nil {
			return 0, err
		}
	}
	a := len(t.names)
	t.names = append(t.names, name)
	t.parent = append(t.parent, p)
	t.backup = append(t.backup, None)
	t.children = append(t.children, nil)
	t.gone = append(t.gone, false)
	t.setChildren(p, append(slices.Clone(t.Children(p)), a))
	return a, nil
}

// RecomputeBackups gives every agent below a child of the root a backup
// parent again, deterministically, by the plan's rule: an agent whose
// parent P is at depth d takes one of the other agents at depth d (or, if
// P is alone there, at depth d-1), never its own parent nor one of its own
// subtree, dealt round robin so that no agent fosters many. Children of
// the root fall back to the root group (None).
func (t *Tree) RecomputeBackups() {
	byDepth := map[int][]int{}
	maxD := 0
	var order []int // breadth first, grouped by parent, launch order
	queue := slices.Clone(t.childs0)
	for len(queue) > 0 {
		a := queue[0]
		queue = queue[1:]
		d := t.Depth(a)
		byDepth[d] = append(byDepth[d], a)
		maxD = max(maxD, d)
		order = append(order, a)
		queue = append(queue, t.children[a]...)
	}
	next := map[int]int{} // per pool depth: where the deal goes on
	for _, a := range order {
		t.backup[a] = None
		p := t.parent[a]
		if p == Root {
			continue
		}
		d := t.Depth(p)
		pool := byDepth[d]
		if len(pool) < 2 {
			if d == 1 {
				continue // the root group
			}
			d--
			pool = byDepth[d]
		}
		for range pool {
			c := pool[next[d]%len(pool)]
			next[d]++
			if c != p && !t.InSubtree(c, a) {
				t.backup[a] = c
				break
			}
		}
	}
}

// Fallbacks is agent a's ordered list of parents to try when its parent is
// lost: its backup, its grandparent, then the root group (Root: any root
// replica), without repeats, its lost parent, or removed agents.
func (t *Tree) Fallbacks(a int) []int {
	var out []int
	add := func(x int) {
		if x == None || (x != Root && (t.gone[x] || x == t.parent[a])) || slices.Contains(out, x) {
			return
		}
		out = append(out, x)
	}
	add(t.backup[a])
	if p := t.parent[a]; p != Root {
		add(t.parent[p])
	}
	add(Root)
	return out
}

func (t *Tree) check(a int) error {
	if a < 0 || a >= len(t.names) {
		return fmt.Errorf("topology: no agent %d", a)
	}
	if t.gone[a] {
		return fmt.Errorf("%s: %w", t.names[a], ErrRemoved)
	}
	return nil
}

func (t *Tree) setChildren(p int, cs []int) {
	if p == Root {
		t.childs0 = cs
		return
	}
	t.children[p] = cs
}
