package alloc

import (
	"fmt"
	"strconv"
	"strings"
)

// mapBlock is one (start_node, node_count, ranks_per_node) triple of a
// PMI_process_mapping vector.
type mapBlock struct {
	start, nodes, size int
}

// ProcessMapping renders p as MPICH's PMI_process_mapping value,
// "(vector,(start_node,node_count,ranks_per_node),...)".
//
// The triples are built as Hydra builds them: ranks are taken in order and
// cut into runs of consecutive ranks on one node; neighbouring runs of equal
// length on consecutive nodes merge into one triple. MPICH reads the triples
// in order and starts again from the first one when it runs out before the
// last rank, so the shortest leading group of triples whose repetition gives
// the whole placement is written: a block layout of 4 nodes × 16 ranks is
// "(vector,(0,4,16))" and 8 ranks round-robin over 4 nodes "(vector,(0,4,1))".
//
// The value can exceed the 1024 bytes a PMI-1 value may hold for irregular
// layouts; a PMI server must then withhold it (MPICH falls back to a
// hostname exchange). An empty placement gives "".
func ProcessMapping(p *Placement) string {
	if p == nil || len(p.Ranks) == 0 {
		return ""
	}
	blocks := mappingBlocks(p)
	blocks = blocks[:mappingPeriod(p, blocks)]
	var b strings.Builder
	b.WriteString("(vector")
	for _, bl := range blocks {
		b.WriteString(",(")
		b.WriteString(strconv.Itoa(bl.start))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(bl.nodes))
		b.WriteByte(',')
		b.WriteString(strconv.Itoa(bl.size))
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// mappingBlocks cuts the ranks into runs on one node and merges runs of
// equal length on consecutive nodes.
func mappingBlocks(p *Placement) []mapBlock {
	var blocks []mapBlock
	for r := 0; r < len(p.Ranks); {
		node := p.Ranks[r].Node
		run := 1
		for r+run < len(p.Ranks) && p.Ranks[r+run].Node == node {
			run++
		}
		r += run
		if n := len(blocks); n > 0 {
			last := &blocks[n-1]
			if last.start+last.nodes == node && last.size == run {
				last.nodes++
				continue
			}
		}
		blocks = append(blocks, mapBlock{start: node, nodes: 1, size: run})
	}
	return blocks
}

// mappingPeriod returns the smallest k such that MPICH, repeating
// blocks[:k], assigns every rank to the node p gives it. Only prefixes
// followed by a block that starts again at node 0 can be periods, and MPICH
// restarts its repetition at a block starting at node 0, so only those are
// tried (and only when the first block starts at node 0); k = len(blocks)
// always works, as it describes every rank without repetition.
func mappingPeriod(p *Placement, blocks []mapBlock) int {
	if blocks[0].start != 0 {
		return len(blocks)
	}
	for k := 1; k < len(blocks); k++ {
		if blocks[k].start != 0 {
			continue
		}
		if expandsTo(blocks[:k], p) {
			return k
		}
	}
	return len(blocks)
}

// expandsTo reports whether repeating blocks (which start at node 0) from
// the first rank on reproduces p's rank -> node map.
func expandsTo(blocks []mapBlock, p *Placement) bool {
	r := 0
	for {
		for _, b := range blocks {
			for n := 0; n < b.nodes; n++ {
				for k := 0; k < b.size; k++ {
					if p.Ranks[r].Node != b.start+n {
						return false
					}
					r++
					if r == len(p.Ranks) {
						return true
					}
				}
			}
		}
	}
}

// NodesOf reads a PMI_process_mapping value back: the node of each of n
// ranks, as MPICH reads it (the triples in order, repeated from the first
// when they run out before the last rank). It is the inverse of
// ProcessMapping.
func NodesOf(mapping string, n int) ([]int, error) {
	s, ok := strings.CutPrefix(mapping, "(vector")
	if !ok || !strings.HasSuffix(s, ")") {
		return nil, fmt.Errorf("process mapping %q: want (vector,(start,nodes,ranks),...)", mapping)
	}
	s = strings.TrimSuffix(s, ")")
	var blocks []mapBlock
	for s != "" {
		rest, ok := strings.CutPrefix(s, ",(")
		end := strings.IndexByte(rest, ')')
		if !ok || end < 0 {
			return nil, fmt.Errorf("process mapping %q: bad triple at %q", mapping, s)
		}
		f := strings.Split(rest[:end], ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("process mapping %q: triple %q has %d numbers", mapping, rest[:end], len(f))
		}
		var v [3]int
		for i, x := range f {
			k, err := strconv.Atoi(x)
			if err != nil || k < 0 {
				return nil, fmt.Errorf("process mapping %q: %q is not a count", mapping, x)
			}
			v[i] = k
		}
		blocks = append(blocks, mapBlock{start: v[0], nodes: v[1], size: v[2]})
		s = rest[end+1:]
	}
	ranks := 0
	for _, b := range blocks {
		ranks += b.nodes * b.size
	}
	if ranks == 0 {
		return nil, fmt.Errorf("process mapping %q places no rank", mapping)
	}
	nodes := make([]int, 0, n)
	for len(nodes) < n {
		for _, b := range blocks {
			for k := 0; k < b.nodes*b.size && len(nodes) < n; k++ {
				nodes = append(nodes, b.start+k/b.size)
			}
		}
	}
	return nodes, nil
}
