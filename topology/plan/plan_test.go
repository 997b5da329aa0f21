package plan_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// allKinds returns one kind of every shape plus a few k-ary factors.
func allKinds() []plan.Kind {
	return []plan.Kind{
		{Shape: plan.Auto}, {Shape: plan.Greedy}, {Shape: plan.KAry, K: 1},
		{Shape: plan.KAry, K: 2}, {Shape: plan.KAry, K: 16}, {Shape: plan.TwoLevel},
		{Shape: plan.Binomial}, {Shape: plan.Flat},
	}
}

func mustBuild(t testing.TB, k plan.Kind, n int, p plan.Params) *plan.Plan {
	t.Helper()
	pl, err := plan.Build(k, n, p)
	if err != nil {
		t.Fatalf("Build(%s, %d, %+v): %v", k, n, p, err)
	}
	return pl
}

// depthsOf computes node depths by walking parents, independently of the
// plan's own indexes; it fails the test on a cycle or a dangling parent.
func depthsOf(t testing.TB, parent []int32) []int {
	t.Helper()
	n := len(parent)
	d := make([]int, n)
	for i := range d {
		d[i] = -1
	}
	d[0] = 0
	var path []int
	for v := range n {
		path = path[:0]
		u := v
		for d[u] < 0 {
			path = append(path, u)
			if len(path) > n {
				t.Fatalf("cycle through node %d", v)
			}
			p := int(parent[u])
			if p < 0 || p >= n {
				t.Fatalf("node %d has parent %d", u, p)
			}
			u = p
		}
		for i := len(path) - 1; i >= 0; i-- {
			d[path[i]] = d[parent[path[i]]] + 1
		}
	}
	return d
}

// inSubtreeSlow reports whether x is in y's subtree by walking up from x.
func inSubtreeSlow(parent []int32, depth []int, x, y int) bool {
	for depth[x] > depth[y] {
		x = int(parent[x])
	}
	return x == y
}

// checkTree checks the tree invariants of pl and returns independent depths.
func checkTree(t *testing.T, pl *plan.Plan, rng *rand.Rand) []int {
	t.Helper()
	n := pl.N()
	if len(pl.Parent) != n || len(pl.Order) != n || len(pl.Backup) != n {
		t.Fatalf("slice lengths %d %d %d, want %d", len(pl.Parent), len(pl.Order), len(pl.Backup), n)
	}
	roots := 0
	for v := range n {
		if pl.Parent[v] == plan.NoNode {
			roots++
		}
	}
	if roots != 1 || pl.Parent[0] != plan.NoNode || pl.Order[0] != 0 {
		t.Fatalf("want exactly one root, node 0; got %d roots, Parent[0]=%d", roots, pl.Parent[0])
	}
	depth := depthsOf(t, pl.Parent) // every node reaches the root
	// Parent/Order/Children consistency.
	fan := make([]int, n)
	for v := 1; v < n; v++ {
		fan[pl.Parent[v]]++
	}
	total, maxFan, maxDepth := 0, 0, 0
	for v := range n {
		cs := pl.Children(v)
		if len(cs) != fan[v] {
			t.Fatalf("node %d: %d children listed, %d nodes name it parent", v, len(cs), fan[v])
		}
		for i, c := range cs {
			if int(pl.Parent[c]) != v || int(pl.Order[c]) != i+1 {
				t.Fatalf("node %d child #%d is %d with parent %d order %d", v, i+1, c, pl.Parent[c], pl.Order[c])
			}
		}
		total += len(cs)
		maxFan = max(maxFan, len(cs))
		maxDepth = max(maxDepth, depth[v])
		if pl.NodeDepth(v) != depth[v] {
			t.Fatalf("NodeDepth(%d) = %d, want %d", v, pl.NodeDepth(v), depth[v])
		}
	}
	if total != n-1 || pl.MaxChildren() != maxFan || pl.Depth() != maxDepth {
		t.Fatalf("children %d (want %d), MaxChildren %d (want %d), Depth %d (want %d)",
			total, n-1, pl.MaxChildren(), maxFan, pl.Depth(), maxDepth)
	}
	// Subtree intervals against an upward walk.
	pairs := 2000
	if n <= 40 {
		pairs = n * n
	}
	for i := range pairs {
		x, y := rng.IntN(n), rng.IntN(n)
		if n <= 40 {
			x, y = i/n, i%n
		} else if i%3 == 0 {
			// Pick y as an ancestor of x often, so true answers get tested.
			y = x
			for range rng.IntN(4) {
				if y != 0 {
					y = int(pl.Parent[y])
				}
			}
		}
		if got, want := pl.InSubtree(x, y), inSubtreeSlow(pl.Parent, depth, x, y); got != want {
			t.Fatalf("InSubtree(%d, %d) = %v, want %v", x, y, got, want)
		}
	}
	if pl.SubtreeSize(0) != n {
		t.Fatalf("SubtreeSize(root) = %d, want %d", pl.SubtreeSize(0), n)
	}
	return depth
}

// checkBackups checks the backup rule, its bounds, the replica placement
// and the fallback lists.
func checkBackups(t *testing.T, pl *plan.Plan, depth []int, replicas int) {
	t.Helper()
	n := pl.N()
	if pl.Backup[0] != plan.NoNode {
		t.Fatalf("root backup %d", pl.Backup[0])
	}
	levels := make([]int, slices.Max(depth)+2)
	for _, d := range depth {
		levels[d]++
	}
	fostered := make([]int, n)
	for v := 1; v < n; v++ {
		b, p := pl.Backup[v], int(pl.Parent[v])
		if p == 0 {
			if b != plan.BackupRootGroup {
				t.Fatalf("root child %d has backup %d, want the root group", v, b)
			}
			continue
		}
		if b == plan.BackupRootGroup {
			// Only allowed where the pool is the root itself.
			if depth[p] != 1 || levels[1] != 1 {
				t.Fatalf("node %d (depth %d) has the root group as backup", v, depth[v])
			}
			continue
		}
		if b < 1 || int(b) >= n || int(b) == v || int(b) == p {
			t.Fatalf("node %d (parent %d) has backup %d", v, p, b)
		}
		if inSubtreeSlow(pl.Parent, depth, int(b), p) || pl.InSubtree(int(b), p) {
			t.Fatalf("node %d: backup %d is in the subtree of its parent %d", v, b, p)
		}
		fostered[b]++
	}
	// Static bound: see the doc of the rule in backup.go and docs/model.md.
	ceil := func(a, b int) int { return (a + b - 1) / b }
	for b := 1; b < n; b++ {
		d := depth[b]
		bound := 0
		if levels[d] >= 2 {
			bound += ceil(levels[d+1], levels[d]-1) + 1
		}
		if levels[d+1] == 1 {
			bound += ceil(levels[d+2], levels[d])
		}
		if fostered[b] > bound {
			t.Fatalf("node %d (depth %d) is backup of %d nodes, bound %d (levels %v)", b, d, fostered[b], bound, levels[max(0, d-1):d+3])
		}
	}
	// Replicas.
	if len(pl.ReplicaNodes) != replicas || pl.ReplicaNodes[0] != 0 {
		t.Fatalf("replica nodes %v for %d replicas", pl.ReplicaNodes, replicas)
	}
	seen := map[int32]bool{}
	rootKids := pl.Children(0)
	for r, v := range pl.ReplicaNodes {
		if seen[v] {
			t.Fatalf("replica nodes %v repeat node %d", pl.ReplicaNodes, v)
		}
		seen[v] = true
		if r >= 1 && r <= len(rootKids) && v != rootKids[r-1] {
			t.Fatalf("replica %d on node %d, want the root's child #%d (%d)", r, v, r, rootKids[r-1])
		}
	}
	// Fallbacks: backup, grandparent, root group; distinct; all outside
	// the parent's subtree.
	for v := 1; v < n; v += max(1, n/500) {
		fb := pl.Fallbacks(v)
		if len(fb) == 0 || fb[0] != pl.Backup[v] || fb[len(fb)-1] != plan.BackupRootGroup {
			t.Fatalf("Fallbacks(%d) = %v (backup %d)", v, fb, pl.Backup[v])
		}
		p := int(pl.Parent[v])
		for i, x := range fb {
			if x >= 0 && (x == 0 || pl.InSubtree(int(x), p)) {
				t.Fatalf("Fallbacks(%d) = %v: entry %d is invalid", v, fb, i)
			}
			if slices.Contains(fb[:i], x) {
				t.Fatalf("Fallbacks(%d) = %v repeats %d", v, fb, x)
			}
		}
		if gp := pl.Parent[p]; p != 0 && gp != 0 && !slices.Contains(fb, gp) {
			t.Fatalf("Fallbacks(%d) = %v lacks grandparent %d", v, fb, gp)
		}
	}
	if pl.Fallbacks(0) != nil {
		t.Fatalf("root has fallbacks %v", pl.Fallbacks(0))
	}
}

// checkFailures fails every non-root launcher in turn: its orphans' backups
// must be alive and spread; for a sample, reattaching the orphans to their
// backups must give a tree rooted at the root.
func checkFailures(t *testing.T, pl *plan.Plan, depth []int, rng *rand.Rand) {
	t.Helper()
	n := pl.N()
	levels := make([]int, slices.Max(depth)+1)
	for _, d := range depth {
		levels[d]++
	}
	count := map[int32]int{}
	var sample []int
	for x := 1; x < n; x++ {
		orphans := pl.Children(x)
		if len(orphans) == 0 {
			continue
		}
		if n <= 300 || rng.IntN(n) < 20 || x == 1 {
			sample = append(sample, x)
		}
		clear(count)
		most := 0
		for _, o := range orphans {
			b := pl.Backup[o]
			if b >= 0 && (int(b) == x || pl.InSubtree(int(b), x)) {
				t.Fatalf("node %d dies: orphan %d's backup %d dies with it", x, o, b)
			}
			count[b]++
			most = max(most, count[b])
		}
		d := depth[x]
		w := levels[d] - 1 // the pool: x's level without x
		if w == 0 {
			w = levels[d-1] // or the level above
		}
		if d >= 1 && levels[d] == 1 && d-1 == 0 {
			continue // all go to the root group
		}
		if bound := (len(orphans) + w - 1) / w; most > bound {
			t.Fatalf("node %d dies: one node adopts %d of its %d orphans, bound %d", x, most, len(orphans), bound)
		}
	}
	np := make([]int32, n)
	for _, x := range sample {
		copy(np, pl.Parent)
		np[x] = -3 // dead
		for _, o := range pl.Children(x) {
			b := pl.Backup[o]
			if b == plan.BackupRootGroup {
				b = 0
			}
			np[o] = b
		}
		// Every live node must reach 0 without meeting x or a cycle.
		state := make([]int8, n) // 0 unknown, 1 on path, 2 reaches root
		state[0] = 2
		var path []int
		for v := range n {
			if v == x {
				continue
			}
			path = path[:0]
			u := v
			for state[u] == 0 {
				state[u] = 1
				path = append(path, u)
				p := np[u]
				if p < 0 {
					t.Fatalf("node %d dies: node %d has no live parent after reattachment", x, u)
				}
				u = int(p)
			}
			if state[u] == 1 {
				t.Fatalf("node %d dies: cycle through node %d after reattachment", x, u)
			}
			for _, w := range path {
				state[w] = 2
			}
		}
	}
}

func TestPlanInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{1, 2, 3, 4, 5, 7, 8, 17, 64, 100, 257, 1000}
	for range 4 {
		sizes = append(sizes, 1+rng.IntN(5000))
	}
	if !testing.Short() {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		for _, k := range allKinds() {
			for _, r := range []int{1, 3, 5} {
				if r > n || (n == 100_000 && r == 5) {
					continue
				}
				p := plan.Params{Seq: rng.Float64() * 0.05, Rem: rng.Float64() * 0.5, Replicas: r}
				t.Run(fmt.Sprintf("%s/n=%d/r=%d", k, n, r), func(t *testing.T) {
					pl := mustBuild(t, k, n, p)
					if pl.Kind != k {
						t.Fatalf("Kind = %s, want %s", pl.Kind, k)
					}
					depth := checkTree(t, pl, rng)
					checkBackups(t, pl, depth, r)
					checkFailures(t, pl, depth, rng)
				})
			}
		}
	}
}

// TestGreedyExtremes covers degenerate parameters: SEQ = 0 gives a flat
// tree, REM = 0 a chain, both zero the defaults.
func TestGreedyExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []plan.Params{{Seq: 0, Rem: 1}, {Seq: 1, Rem: 0}, {Seq: 1e9, Rem: 1e-9}, {}} {
		for _, n := range []int{1, 2, 50, 3000} {
			pl := mustBuild(t, plan.Kind{Shape: plan.Greedy}, n, plan.Params{Seq: p.Seq, Rem: p.Rem, Replicas: min(n, 3)})
			depth := checkTree(t, pl, rng)
			checkBackups(t, pl, depth, min(n, 3))
			checkFailures(t, pl, depth, rng)
			switch {
			case p.Seq == 0 && p.Rem != 0 && n > 1 && pl.Depth() != 1:
				t.Errorf("seq 0, n %d: depth %d, want a flat tree", n, pl.Depth())
			case p.Rem == 0 && p.Seq == 1 && pl.Depth() != n-1:
				t.Errorf("rem 0, n %d: depth %d, want a chain", n, pl.Depth())
			}
		}
	}
	def := mustBuild(t, plan.Kind{Shape: plan.Greedy}, 100, plan.Params{})
	if def.Seq != plan.DefaultSeq || def.Rem != plan.DefaultRem {
		t.Errorf("greedy with zero params shaped by (%v, %v), want the defaults", def.Seq, def.Rem)
	}
}

func TestAutoUsesCalibration(t *testing.T) {
	auto := plan.Kind{Shape: plan.Auto}
	greedy := plan.Kind{Shape: plan.Greedy}
	a := mustBuild(t, auto, 500, plan.Params{Seq: 9, Rem: 9})
	g := mustBuild(t, greedy, 500, plan.Params{Seq: plan.DefaultSeq, Rem: plan.DefaultRem})
	if !slices.Equal(a.Parent, g.Parent) || !slices.Equal(a.Order, g.Order) {
		t.Errorf("auto without calibration differs from greedy with the defaults")
	}
	cal := &plan.Calibration{Seq: 0.007, Rem: 0.172}
	a = mustBuild(t, auto, 500, plan.Params{Calibration: cal})
	g = mustBuild(t, greedy, 500, plan.Params{Seq: 0.007, Rem: 0.172})
	if !slices.Equal(a.Parent, g.Parent) || a.Seq != 0.007 || a.Rem != 0.172 {
		t.Errorf("auto with calibration differs from greedy with it")
	}
}

func TestShapesExact(t *testing.T) {
	cases := []struct {
		kind          string
		n             int
		parent, order []int32
	}{
		{"kary:3", 8, []int32{-1, 0, 0, 0, 1, 1, 1, 2}, []int32{0, 1, 2, 3, 1, 2, 3, 1}},
		{"flat", 4, []int32{-1, 0, 0, 0}, []int32{0, 1, 2, 3}},
		{"flat", 1, []int32{-1}, []int32{0}},
		{"binomial", 8, []int32{-1, 0, 0, 1, 0, 1, 2, 3}, []int32{0, 1, 2, 1, 3, 2, 1, 1}},
		// 2level, n=10: 3 launchers, 6 more nodes in blocks of 2.
		{"2level", 10, []int32{-1, 0, 0, 0, 1, 1, 2, 2, 3, 3}, []int32{0, 1, 2, 3, 1, 2, 1, 2, 1, 2}},
		// 2level, n=9: 3 launchers, 5 more: blocks 2, 2, 1.
		{"2level", 9, []int32{-1, 0, 0, 0, 1, 1, 2, 2, 3}, []int32{0, 1, 2, 3, 1, 2, 1, 2, 1}},
		{"2level", 2, []int32{-1, 0}, []int32{0, 1}},
		// greedy with SEQ = REM = 1: the number of nodes up doubles each step.
		// Ties go to the position opened first.
		{"greedy", 8, []int32{-1, 0, 0, 1, 0, 2, 1, 3}, []int32{0, 1, 2, 1, 3, 1, 2, 1}},
	}
	for _, c := range cases {
		k, err := plan.ParseKind(c.kind)
		if err != nil {
			t.Fatal(err)
		}
		pl := mustBuild(t, k, c.n, plan.Params{Seq: 1, Rem: 1})
		if !slices.Equal(pl.Parent, c.parent) || !slices.Equal(pl.Order, c.order) {
			t.Errorf("%s n=%d: parent %v order %v, want %v %v", c.kind, c.n, pl.Parent, pl.Order, c.parent, c.order)
		}
	}
	// 2level uses ceil(sqrt(n-1)) launchers, exactly, at perfect squares.
	for _, n := range []int{17, 26, 10_001, 10_002} {
		pl := mustBuild(t, plan.Kind{Shape: plan.TwoLevel}, n, plan.Params{})
		m := 0
		for m*m < n-1 {
			m++
		}
		if got := len(pl.Children(0)); got != m || pl.Depth() != 2 {
			t.Errorf("2level n=%d: %d launchers, depth %d; want %d, 2", n, got, pl.Depth(), m)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	g := plan.Kind{Shape: plan.Greedy}
	bad := []struct {
		kind plan.Kind
		n    int
		p    plan.Params
	}{
		{g, 0, plan.Params{}},
		{g, -5, plan.Params{}},
		{g, plan.MaxNodes + 1, plan.Params{}},
		{g, 10, plan.Params{Seq: -1}},
		{g, 10, plan.Params{Rem: -0.1}},
		{g, 10, plan.Params{Rem: nan()}},
		{g, 10, plan.Params{Replicas: -1}},
		{g, 2, plan.Params{Replicas: 3}},
		{plan.Kind{Shape: plan.Auto}, 10, plan.Params{Calibration: &plan.Calibration{Seq: -1}}},
		{plan.Kind{Shape: plan.KAry, K: 0}, 10, plan.Params{}},
		{plan.Kind{Shape: 99}, 10, plan.Params{}},
	}
	for _, c := range bad {
		if pl, err := plan.Build(c.kind, c.n, c.p); err == nil {
			t.Errorf("Build(%s, %d, %+v) = %d nodes, want an error", c.kind, c.n, c.p, pl.N())
		}
	}
}

func nan() float64 { z := 0.0; return z / z }
