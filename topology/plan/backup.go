package plan

// assignBackupsAndReplicas fills Backup and ReplicaNodes.
//
// Rule. Let v be a non-root node whose parent P has depth d >= 1. Every
// node of depth <= d other than P is outside P's subtree (P's proper
// descendants are deeper than d), so it is a valid backup. The backup is
// taken from the pool
//
//   - the nodes of depth d other than P, when depth d holds at least two
//     nodes;
//   - else the nodes of depth d-1 (P's level holds P alone);
//
// and a pool at depth 0 (the root) is written BackupRootGroup. Children of
// the root get BackupRootGroup.
//
// Spread. The children of the level below a pool are taken in
// breadth-first order (grouped by parent, in launch order) and dealt round
// robin over the pool, skipping a child's own parent. Consequences, with w
// the pool's size (including P in the first case) and c the number of
// nodes dealt over it:
//
//   - when one node X dies, its f orphans go to distinct nodes while
//     f <= w-1: no node adopts more than ceil(f/(w-1)) of them (ceil(f/w)
//     for a pool one level up);
//   - no node is named backup by more than ceil(c/(w-1)) + 1 nodes
//     (ceil(c/w) for a pool one level up).
func (pl *Plan) assignBackupsAndReplicas(replicas int) {
	n := len(pl.Parent)
	backup := make([]int32, n)
	backup[0] = NoNode

	// Breadth-first order and level boundaries. Children of one parent
	// are contiguous and in launch order.
	bfs := make([]int32, 1, n)
	levelStart := []int{0}
	for i := 0; i < len(bfs); i++ {
		v := bfs[i]
		if int(pl.depth[v]) == len(levelStart) {
			levelStart = append(levelStart, i)
		}
		bfs = append(bfs, pl.Children(int(v))...)
	}
	levelStart = append(levelStart, n)
	level := func(d int) []int32 { return bfs[levelStart[d]:levelStart[d+1]] }

	for d := 1; d+1 < len(levelStart); d++ {
		below := level(d) // nodes of depth d: their parents are at depth d-1
		if d == 1 {
			for _, v := range below {
				backup[v] = BackupRootGroup
			}
			continue
		}
		pool := level(d - 1)
		skip := true
		if len(pool) == 1 {
			// The parent is alone on its level: go one level up.
			pool, skip = level(d-2), false
		}
		w := len(pool)
		r := 0
		for _, v := range below {
			if skip && pool[r] == pl.Parent[v] {
				r++
				if r == w {
					r = 0
				}
			}
			b := pool[r]
			if b == 0 {
				b = BackupRootGroup
			}
			backup[v] = b
			r++
			if r == w {
				r = 0
			}
		}
	}
	pl.Backup = backup

	// Root replicas: node 0, then the next nodes of the breadth-first
	// order, which are the root's children in launch order first.
	pl.ReplicaNodes = append([]int32(nil), bfs[:replicas]...)
}

// Fallbacks returns v's ordered list of parents to try when its primary
// parent is lost: its backup, its grandparent, then the root group
// (BackupRootGroup), without repeats. Node 0 would appear as
// BackupRootGroup. The root has no fallbacks (nil). The result is a new
// slice owned by the caller.
func (pl *Plan) Fallbacks(v int) []int32 {
	if v <= 0 || v >= len(pl.Parent) {
		return nil
	}
	out := make([]int32, 0, 3)
	add := func(x int32) {
		if x == 0 {
			x = BackupRootGroup
		}
		for _, y := range out {
			if y == x {
				return
			}
		}
		out = append(out, x)
	}
	add(pl.Backup[v])
	if p := pl.Parent[v]; p > 0 {
		add(pl.Parent[p])
	}
	add(BackupRootGroup)
	return out
}
