package plan

import "math/bits"

// buildKAry returns the breadth-first k-ary tree: node i's children are
// k*i+1 ... k*i+k, launched in that order. Flat is kary with k = n-1.
func buildKAry(n, k int) (parent, order []int32) {
	parent = make([]int32, n)
	order = make([]int32, n)
	parent[0] = NoNode
	for i := 1; i < n; i++ {
		parent[i] = int32((i - 1) / k)
		order[i] = int32((i-1)%k + 1)
	}
	return parent, order
}

// ceilSqrt returns the smallest m >= 0 with m*m >= x.
func ceilSqrt(x int) int {
	if x <= 0 {
		return 0
	}
	// Start from the floating-point root and correct it exactly.
	m := int(sqrtFloor(uint64(x)))
	if m*m < x {
		m++
	}
	return m
}

// sqrtFloor returns floor(sqrt(x)) exactly.
func sqrtFloor(x uint64) uint64 {
	if x < 2 {
		return x
	}
	// Newton's method on integers, starting above the root.
	r := uint64(1) << ((bits.Len64(x) + 1) / 2)
	for {
		s := (r + x/r) / 2
		if s >= r {
			return r
		}
		r = s
	}
}

// buildTwoLevel returns charmrun's hierarchical start: the root launches
// m = ceil(sqrt(n-1)) leaf launchers (nodes 1..m), and the remaining
// n-1-m nodes are split into m contiguous blocks, the first (rest mod m)
// blocks one node larger; launcher j launches block j in id order.
func buildTwoLevel(n int) (parent, order []int32) {
	parent = make([]int32, n)
	order = make([]int32, n)
	parent[0] = NoNode
	if n == 1 {
		return parent, order
	}
	m := ceilSqrt(n - 1)
	for i := 1; i <= m; i++ {
		parent[i] = 0
		order[i] = int32(i)
	}
	rest := n - 1 - m
	base, extra := rest/m, rest%m
	v := m + 1
	for j := 0; j < m; j++ {
		size := base
		if j < extra {
			size++
		}
		for o := 1; o <= size; o++ {
			parent[v] = int32(j + 1)
			order[v] = int32(o)
			v++
		}
	}
	return parent, order
}

// buildBinomial returns the binomial tree: the parent of i is i with its
// highest set bit cleared, and node i launches i+2^j for every 2^j > i in
// increasing j. With SEQ = REM every node is up after ceil(log2 n) steps.
func buildBinomial(n int) (parent, order []int32) {
	parent = make([]int32, n)
	order = make([]int32, n)
	parent[0] = NoNode
	for i := 1; i < n; i++ {
		hb := bits.Len(uint(i)) - 1 // i = p + 2^hb
		p := i &^ (1 << hb)
		parent[i] = int32(p)
		// p's children are p+2^j for j >= bits.Len(p); order counts from 1.
		order[i] = int32(hb - bits.Len(uint(p)) + 1)
	}
	return parent, order
}
