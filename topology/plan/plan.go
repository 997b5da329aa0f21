package plan

import (
	"errors"
	"fmt"
	"math"
)

// Documented defaults for the model parameters, in seconds: the sequential
// per-launch cost and the remote launch time measured for x/crypto/ssh with
// TCP_QUICKACK on the project's emulated cluster (docs/model.md).
const (
	DefaultSeq = 0.035
	DefaultRem = 0.034
)

// MaxNodes bounds the node count of a plan (node ids are int32).
const MaxNodes = 1 << 22

// Sentinels used in Plan.Parent and Plan.Backup.
const (
	// NoNode is the parent of the root and the backup of the root.
	NoNode int32 = -1
	// BackupRootGroup is the backup of a child of the root: "whichever root
	// replica leads". It is also used where the backup would be node 0
	// itself, because node 0 stops being the root when it dies.
	BackupRootGroup int32 = -2
)

// Calibration holds measured model parameters, e.g. read from the user's
// cache of an earlier measurement. The zero value is not a calibration.
type Calibration struct {
	Seq float64 // seconds between two successive launches by one parent
	Rem float64 // seconds for one remote launch to complete
}

// Params shapes a plan. The zero value is usable: greedy then uses the
// documented defaults and the plan has a single root replica.
type Params struct {
	// Seq and Rem (seconds, >= 0) shape the greedy tree. If both are
	// zero, DefaultSeq and DefaultRem are used. Other shapes ignore them.
	Seq, Rem float64
	// Calibration, if not nil, shapes the Auto tree; without it Auto uses
	// DefaultSeq and DefaultRem. Greedy ignores it.
	Calibration *Calibration
	// Replicas is the size R of the root group (1, 3 or 5 in practice;
	// 0 means 1). Replica 0 is node 0; replicas 1..R-1 go to the first
	// R-1 nodes of the breadth-first launch order after the root, i.e. to
	// the root's first R-1 children when it has that many.
	Replicas int
}

// Plan is a launch tree over nodes 0..N-1 with backup links and root
// replica placement.
//
// The exported slices are indexed by node id and must be treated as
// read-only: the plan keeps indexes derived from them. A Plan is immutable
// after Build and safe for concurrent readers.
type Plan struct {
	// Kind is the kind that was asked for (Auto stays Auto).
	Kind Kind
	// Seq and Rem are the parameters that shaped a greedy or auto tree
	// (zero for the other shapes).
	Seq, Rem float64
	// Parent[v] is v's primary parent, NoNode for the root (node 0).
	Parent []int32
	// Order[v] is v's 1-based position in its parent's launch sequence,
	// 0 for the root.
	Order []int32
	// Backup[v] is v's backup parent: a node outside the subtree of
	// Parent[v], or BackupRootGroup for a child of the root (and wherever
	// the backup would be node 0); NoNode for the root.
	Backup []int32
	// ReplicaNodes[r] is the node hosting root replica r; ReplicaNodes[0]
	// is always node 0. Its length is the number of replicas.
	ReplicaNodes []int32

	childOff []int32 // children of v are child[childOff[v]:childOff[v+1]]
	child    []int32
	preOrder []int32 // nodes in DFS pre-order (children in launch order)
	pre      []int32 // pre[v] is v's position in preOrder
	end      []int32 // subtree of v is preOrder[pre[v]:end[v]]
	depth    []int32
	maxDepth int
	maxFan   int
}

// Build returns the plan of the given kind over n nodes (1 <= n <=
// MaxNodes; n counts the root). It is pure and deterministic: equal inputs
// give equal plans.
func Build(kind Kind, n int, p Params) (*Plan, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("build %s plan: node count %d out of range 1..%d", kind, n, MaxNodes)
	}
	if err := kind.validate(); err != nil {
		return nil, fmt.Errorf("build plan: %w", err)
	}
	if err := p.validate(n); err != nil {
		return nil, fmt.Errorf("build %s plan: %w", kind, err)
	}
	pl := &Plan{Kind: kind}
	switch kind.Shape {
	case Greedy, Auto:
		pl.Seq, pl.Rem = p.shaping(kind.Shape)
		pl.Parent, pl.Order = buildGreedy(n, pl.Seq, pl.Rem)
	case KAry:
		pl.Parent, pl.Order = buildKAry(n, kind.K)
	case TwoLevel:
		pl.Parent, pl.Order = buildTwoLevel(n)
	case Binomial:
		pl.Parent, pl.Order = buildBinomial(n)
	case Flat:
		pl.Parent, pl.Order = buildKAry(n, max(n-1, 1))
	}
	if err := pl.index(); err != nil {
		// A builder produced a broken tree: a bug, reported, not a panic.
		return nil, fmt.Errorf("build %s plan of %d nodes: %w", kind, n, err)
	}
	replicas := max(p.Replicas, 1)
	pl.assignBackupsAndReplicas(replicas)
	return pl, nil
}

func checkSeconds(name string, v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return fmt.Errorf("%s = %v seconds: must be a finite number >= 0", name, v)
	}
	return nil
}

func (p Params) validate(n int) error {
	if err := checkSeconds("seq", p.Seq); err != nil {
		return err
	}
	if err := checkSeconds("rem", p.Rem); err != nil {
		return err
	}
	if c := p.Calibration; c != nil {
		if err := checkSeconds("calibrated seq", c.Seq); err != nil {
			return err
		}
		if err := checkSeconds("calibrated rem", c.Rem); err != nil {
			return err
		}
	}
	if p.Replicas < 0 {
		return fmt.Errorf("replicas = %d: must be >= 1", p.Replicas)
	}
	if p.Replicas > n {
		return fmt.Errorf("replicas = %d: a plan of %d nodes can host at most %d root replicas (one per node)", p.Replicas, n, n)
	}
	return nil
}

// shaping returns the (seq, rem) that shape a greedy or auto tree.
func (p Params) shaping(s Shape) (float64, float64) {
	if s == Auto {
		if p.Calibration != nil {
			return p.Calibration.Seq, p.Calibration.Rem
		}
		return DefaultSeq, DefaultRem
	}
	if p.Seq == 0 && p.Rem == 0 {
		return DefaultSeq, DefaultRem
	}
	return p.Seq, p.Rem
}

// N returns the number of nodes, root included.
func (pl *Plan) N() int { return len(pl.Parent) }

// Children returns v's children in launch order (Order 1, 2, ...). The
// slice aliases the plan's storage: do not modify it.
func (pl *Plan) Children(v int) []int32 {
	return pl.child[pl.childOff[v]:pl.childOff[v+1]:pl.childOff[v+1]]
}

// Depth returns the number of edges from the root to the deepest node.
func (pl *Plan) Depth() int { return pl.maxDepth }

// NodeDepth returns the number of edges from the root to v.
func (pl *Plan) NodeDepth(v int) int { return int(pl.depth[v]) }

// MaxChildren returns the largest number of children of any node.
func (pl *Plan) MaxChildren() int { return pl.maxFan }

// InSubtree reports whether x is in the subtree rooted at y (x == y
// included), in O(1) using DFS pre-order intervals. Ids out of range give
// false.
func (pl *Plan) InSubtree(x, y int) bool {
	n := len(pl.Parent)
	if x < 0 || y < 0 || x >= n || y >= n {
		return false
	}
	return pl.pre[y] <= pl.pre[x] && pl.pre[x] < pl.end[y]
}

// SubtreeSize returns the number of nodes in the subtree rooted at v.
func (pl *Plan) SubtreeSize(v int) int { return int(pl.end[v] - pl.pre[v]) }

// index builds the children lists, pre-order intervals and depths from
// Parent and Order, and checks that they form one tree rooted at node 0
// with orders 1..k at every parent.
func (pl *Plan) index() error {
	n := len(pl.Parent)
	if len(pl.Order) != n || n == 0 {
		return fmt.Errorf("parent and order have lengths %d and %d", n, len(pl.Order))
	}
	if pl.Parent[0] != NoNode || pl.Order[0] != 0 {
		return errors.New("node 0 is not the root")
	}
	off := make([]int32, n+1)
	for v := 1; v < n; v++ {
		p := pl.Parent[v]
		if p < 0 || int(p) >= n {
			return fmt.Errorf("node %d has parent %d out of range", v, p)
		}
		off[p+1]++
	}
	for v := 0; v < n; v++ {
		if int(off[v+1]) > pl.maxFan {
			pl.maxFan = int(off[v+1])
		}
		off[v+1] += off[v]
	}
	child := make([]int32, n-1)
	for i := range child {
		child[i] = NoNode
	}
	for v := 1; v < n; v++ {
		p, o := pl.Parent[v], pl.Order[v]
		if o < 1 || o > off[p+1]-off[p] {
			return fmt.Errorf("node %d has order %d at parent %d with %d children", v, o, p, off[p+1]-off[p])
		}
		slot := off[p] + o - 1
		if child[slot] != NoNode {
			return fmt.Errorf("nodes %d and %d share order %d at parent %d", child[slot], v, o, p)
		}
		child[slot] = int32(v)
	}
	pl.childOff, pl.child = off, child

	pl.preOrder = make([]int32, 0, n)
	pl.pre = make([]int32, n)
	pl.end = make([]int32, n)
	pl.depth = make([]int32, n)
	stack := make([]int32, 1, 64)
	stack[0] = 0
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		pl.pre[v] = int32(len(pl.preOrder))
		pl.preOrder = append(pl.preOrder, v)
		if v != 0 {
			d := pl.depth[pl.Parent[v]] + 1
			pl.depth[v] = d
			if int(d) > pl.maxDepth {
				pl.maxDepth = int(d)
			}
		}
		cs := child[off[v]:off[v+1]]
		for i := len(cs) - 1; i >= 0; i-- {
			stack = append(stack, cs[i])
		}
	}
	if len(pl.preOrder) != n {
		// Every node has a parent slot, so a short walk means a cycle.
		return fmt.Errorf("only %d of %d nodes are reachable from the root", len(pl.preOrder), n)
	}
	for i := n - 1; i >= 0; i-- {
		v := pl.preOrder[i]
		sz := int32(1)
		for _, c := range child[off[v]:off[v+1]] {
			sz += pl.end[c] - pl.pre[c]
		}
		pl.end[v] = pl.pre[v] + sz
	}
	return nil
}
