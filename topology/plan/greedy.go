package plan

// position is an open slot of the greedy tree: the order-th child of
// parent, which would be up at time t.
type position struct {
	t      float64
	seq    uint32 // insertion number: equal times are served first-in first-out
	parent int32
	order  int32
}

func (a position) less(b position) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// posHeap is a binary min-heap of positions, hand-rolled to keep the
// 100,000-node build free of interface calls.
type posHeap []position

func (h *posHeap) push(p position) {
	*h = append(*h, p)
	s := *h
	i := len(s) - 1
	for i > 0 {
		up := (i - 1) / 2
		if !s[i].less(s[up]) {
			break
		}
		s[i], s[up] = s[up], s[i]
		i = up
	}
}

// replaceTop replaces the smallest position with p and restores the heap.
func (h posHeap) replaceTop(p position) {
	h[0] = p
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			m = r
		}
		if !h[m].less(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// buildGreedy returns Goehner's greedy tree for (seq, rem): nodes are
// placed one at a time in the open position with the smallest modeled
// launch time (ties: the position opened first), and each placement opens
// the next sibling position (+seq) and the new node's first child position
// (+rem). Node ids are given in placement order, so node ids grow with
// modeled launch time. Times are computed exactly as the model computes
// them: launch(parent) + seq*(order-1) + rem.
func buildGreedy(n int, seq, rem float64) (parent, order []int32) {
	parent = make([]int32, n)
	order = make([]int32, n)
	parent[0] = NoNode
	if n == 1 {
		return parent, order
	}
	launch := make([]float64, n)
	h := make(posHeap, 0, n+1)
	var ins uint32
	h.push(position{t: rem, seq: ins, parent: 0, order: 1})
	ins++
	for v := 1; v < n; v++ {
		// Take the earliest position and open its next sibling in its place.
		p := h[0]
		parent[v], order[v] = p.parent, p.order
		launch[v] = p.t
		h.replaceTop(position{t: launch[p.parent] + seq*float64(p.order) + rem, seq: ins, parent: p.parent, order: p.order + 1})
		ins++
		h.push(position{t: launch[v] + rem, seq: ins, parent: int32(v), order: 1})
		ins++
	}
	return parent, order
}
