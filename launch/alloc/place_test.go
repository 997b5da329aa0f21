package alloc

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// hosts builds an allocation from "name:slots" words (slots 0 = no count).
func hosts(specs ...string) Allocation {
	a := Allocation{Source: SourceHostList}
	for _, s := range specs {
		name, n, _ := strings.Cut(s, ":")
		slots, _ := strconv.Atoi(n)
		a.Hosts = append(a.Hosts, Host{Name: name, Slots: slots})
	}
	return a
}

// nodeNames lists, for each rank, the name of its node.
func nodeNames(p *Placement) []string {
	out := make([]string, len(p.Ranks))
	for r, rp := range p.Ranks {
		out[r] = p.Nodes[rp.Node].Name
	}
	return out
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name    string
		alloc   Allocation
		req     Request
		want    string // node name per rank, space separated
		wantErr string
	}{
		{name: "block explicit", alloc: hosts("a:2", "b:2"), req: Request{NP: 4}, want: "a a b b"},
		{name: "block partial", alloc: hosts("a:4", "b:4"), req: Request{NP: 3}, want: "a a a"},
		{name: "block uneven", alloc: hosts("a:3", "b:1", "c:2"), req: Request{NP: 6}, want: "a a a b c c"},
		{name: "no counts ceil", alloc: hosts("a", "b", "c"), req: Request{NP: 7}, want: "a a a b b b c"},
		{name: "mixed counts", alloc: hosts("a:1", "b"), req: Request{NP: 3}, want: "a b b"},
		{name: "single node", alloc: Local("localhost"), req: Request{NP: 3}, want: "localhost localhost localhost"},
		{name: "ppn sets", alloc: hosts("a", "b", "c"), req: Request{NP: 4, PPN: 2}, want: "a a b b"},
		{name: "ppn overrides slots", alloc: hosts("a:1", "b:1"), req: Request{NP: 4, PPN: 2}, want: "a a b b"},
		{name: "ppn caps slots", alloc: hosts("a:8", "b:8"), req: Request{NP: 4, PPN: 2}, want: "a a b b"},
		{name: "by node", alloc: hosts("a:2", "b:2"), req: Request{NP: 4, MapBy: MapByNode}, want: "a b a b"},
		{name: "by node uneven", alloc: hosts("a:3", "b:1", "c:2"), req: Request{NP: 6, MapBy: MapByNode}, want: "a b c a c a"},
		{name: "by node few", alloc: hosts("a:4", "b:4", "c:4"), req: Request{NP: 2, MapBy: MapByNode}, want: "a b"},
		{name: "by node ppn", alloc: hosts("a", "b"), req: Request{NP: 4, PPN: 2, MapBy: MapByNode}, want: "a b a b"},
		{name: "oversubscribe block", alloc: hosts("a:1", "b:2"), req: Request{NP: 5, Oversubscribe: true}, want: "a b b a b"},
		{name: "oversubscribe by node", alloc: hosts("a:2", "b:1"), req: Request{NP: 5, MapBy: MapByNode, Oversubscribe: true}, want: "a b a a b"},
		{name: "too many", alloc: hosts("a:2", "b:2"), req: Request{NP: 5}, wantErr: "-n 5 exceeds the 4 slots"},
		{name: "too many ppn", alloc: hosts("a", "b"), req: Request{NP: 5, PPN: 2, Oversubscribe: true}, wantErr: "does not fit --ppn 2"},
		{name: "empty", alloc: Allocation{}, req: Request{NP: 1}, wantErr: "empty allocation"},
		{name: "n zero", alloc: hosts("a"), req: Request{NP: 0}, wantErr: "-n 0: need at least one rank"},
		{name: "n negative", alloc: hosts("a"), req: Request{NP: -3}, wantErr: "need at least one rank"},
		{name: "n absurd", alloc: hosts("a"), req: Request{NP: MaxRanks + 1}, wantErr: "exceeds the limit"},
		{name: "ppn negative", alloc: hosts("a"), req: Request{NP: 1, PPN: -1}, wantErr: "--ppn -1"},
		{name: "slots negative", alloc: Allocation{Hosts: []Host{{"a", -2}}}, req: Request{NP: 1}, wantErr: "out of range"},
		{name: "bad map", alloc: hosts("a"), req: Request{NP: 1, MapBy: 7}, wantErr: "unknown mapping"},
	}
	for _, tc := range tests {
		p, err := Place(tc.alloc, tc.req)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := strings.Join(nodeNames(p), " "); got != tc.want {
			t.Errorf("%s: ranks on %q, want %q", tc.name, got, tc.want)
		}
		checkPlacement(t, tc.name, p)
	}
}

func TestPlaceDetails(t *testing.T) {
	p, err := Place(hosts("a:3", "b:1", "c:2"), Request{NP: 6, MapBy: MapByNode})
	if err != nil {
		t.Fatal(err)
	}
	want := &Placement{
		Ranks: []RankPlace{{0, 0, 3}, {1, 0, 1}, {2, 0, 2}, {0, 1, 3}, {2, 1, 2}, {0, 2, 3}},
		Nodes: []NodePlace{{"a", []int{0, 3, 5}, 3}, {"b", []int{1}, 1}, {"c", []int{2, 4}, 2}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("Place = %+v, want %+v", p, want)
	}
	// Unused hosts are left out, so node indices stay dense.
	p, err = Place(hosts("a:2", "b:2", "c:2"), Request{NP: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Nodes) != 1 || p.Nodes[0].Name != "a" {
		t.Fatalf("nodes %+v, want only a", p.Nodes)
	}
	// A node's slots: its own count, else --ppn, else not known (0).
	p, err = Place(hosts("a:4", "b"), Request{NP: 6, PPN: 3})
	if err != nil {
		t.Fatal(err)
	}
	if p.Nodes[0].Slots != 4 || p.Nodes[1].Slots != 3 {
		t.Fatalf("slots with --ppn 3: %+v", p.Nodes)
	}
	if p, err = Place(hosts("a", "b"), Request{NP: 4}); err != nil || p.Nodes[0].Slots != 0 {
		t.Fatalf("slots without counts: %+v, %v", p, err)
	}
}

func TestParseMapBy(t *testing.T) {
	for in, want := range map[string]MapBy{"": MapBySlot, "slot": MapBySlot, "core": MapBySlot, "node": MapByNode} {
		got, ppn, err := ParseMapBy(in)
		if err != nil || got != want || ppn != 0 {
			t.Errorf("ParseMapBy(%q) = %v, %d, %v; want %v", in, got, ppn, err, want)
		}
	}
	if got, ppn, err := ParseMapBy("ppr:3:node"); err != nil || got != MapBySlot || ppn != 3 {
		t.Errorf("ParseMapBy(ppr:3:node) = %v, %d, %v; want slot, 3", got, ppn, err)
	}
	for _, bad := range []string{"socket", "ppr:0:node", "ppr:2:socket", "ppr:x:node", "ppr:2"} {
		if _, _, err := ParseMapBy(bad); err == nil {
			t.Errorf("ParseMapBy(%s) succeeded", bad)
		}
	}
}

// checkPlacement verifies the internal consistency of p.
func checkPlacement(t *testing.T, what string, p *Placement) {
	t.Helper()
	seen := make([]bool, len(p.Ranks))
	for n, node := range p.Nodes {
		if len(node.Ranks) == 0 {
			t.Errorf("%s: node %d has no ranks", what, n)
		}
		for lr, r := range node.Ranks {
			if seen[r] {
				t.Errorf("%s: rank %d on two nodes", what, r)
			}
			seen[r] = true
			rp := p.Ranks[r]
			if rp.Node != n || rp.LocalRank != lr || rp.LocalSize != len(node.Ranks) {
				t.Errorf("%s: rank %d = %+v, want node %d local %d/%d", what, r, rp, n, lr, len(node.Ranks))
			}
			if lr > 0 && node.Ranks[lr-1] >= r {
				t.Errorf("%s: node %d ranks not ascending: %v", what, n, node.Ranks)
			}
		}
	}
	for r, ok := range seen {
		if !ok {
			t.Errorf("%s: rank %d on no node", what, r)
		}
	}
}

func TestProcessMapping(t *testing.T) {
	tests := []struct {
		name  string
		alloc Allocation
		req   Request
		want  string
	}{
		{name: "block 4x16", alloc: hosts("a:16", "b:16", "c:16", "d:16"), req: Request{NP: 64}, want: "(vector,(0,4,16))"},
		{name: "single node", alloc: hosts("a:8"), req: Request{NP: 8}, want: "(vector,(0,1,8))"},
		{name: "single rank", alloc: Local("x"), req: Request{NP: 1}, want: "(vector,(0,1,1))"},
		{name: "round robin", alloc: hosts("a:2", "b:2", "c:2", "d:2"), req: Request{NP: 8, MapBy: MapByNode}, want: "(vector,(0,4,1))"},
		{name: "round robin partial", alloc: hosts("a:2", "b:2", "c:2", "d:2"), req: Request{NP: 6, MapBy: MapByNode}, want: "(vector,(0,4,1))"},
		{name: "uneven block", alloc: hosts("a:2", "b:2", "c:2", "d:1"), req: Request{NP: 7}, want: "(vector,(0,3,2),(3,1,1))"},
		{name: "uneven first", alloc: hosts("a:3", "b:1", "c:1"), req: Request{NP: 5}, want: "(vector,(0,1,3),(1,2,1))"},
		{name: "partial last node", alloc: hosts("a", "b", "c"), req: Request{NP: 7}, want: "(vector,(0,2,3),(2,1,1))"},
		{name: "round robin uneven", alloc: hosts("a:3", "b:1", "c:2"), req: Request{NP: 6, MapBy: MapByNode},
			want: "(vector,(0,3,1),(0,1,1),(2,1,1))"},
		{name: "oversubscribed block", alloc: hosts("a:1", "b:2"), req: Request{NP: 6, Oversubscribe: true}, want: "(vector,(0,1,1),(1,1,2))"},
	}
	for _, tc := range tests {
		p, err := Place(tc.alloc, tc.req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := ProcessMapping(p)
		if got != tc.want {
			t.Errorf("%s: ProcessMapping = %s, want %s", tc.name, got, tc.want)
		}
		checkMPICHReads(t, tc.name, got, p)
	}
	if got := ProcessMapping(&Placement{}); got != "" {
		t.Errorf("empty placement: %q", got)
	}
}

// TestProcessMappingRandom checks, over many random layouts, that MPICH's
// reading of the mapping gives every rank the node Place gave it.
func TestProcessMappingRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a := Allocation{Source: SourceHostList}
		nh := 1 + rng.IntN(6)
		total := 0
		for h := range nh {
			slots := rng.IntN(5) // 0 = no count
			a.Hosts = append(a.Hosts, Host{Name: fmt.Sprintf("h%d", h), Slots: slots})
			total += slots
		}
		req := Request{NP: 1 + rng.IntN(30), Oversubscribe: rng.IntN(2) == 0}
		if rng.IntN(2) == 0 {
			req.MapBy = MapByNode
		}
		if rng.IntN(4) == 0 {
			req.PPN = 1 + rng.IntN(4)
		}
		p, err := Place(a, req)
		if err != nil {
			continue // e.g. more ranks than slots; covered by TestPlace
		}
		what := fmt.Sprintf("case %d %+v %+v", i, a.Hosts, req)
		checkPlacement(t, what, p)
		checkMPICHReads(t, what, ProcessMapping(p), p)
		nodes, err := NodesOf(ProcessMapping(p), len(p.Ranks))
		if err != nil {
			t.Fatalf("%s: NodesOf(%q): %v", what, ProcessMapping(p), err)
		}
		for r, pr := range p.Ranks {
			if nodes[r] != pr.Node {
				t.Fatalf("%s: NodesOf(%q) puts rank %d on node %d, Place on %d", what, ProcessMapping(p), r, nodes[r], pr.Node)
			}
		}
	}
}

func TestNodesOfRefuses(t *testing.T) {
	for _, m := range []string{"", "(vector)", "(vector,(0,0,0))", "(vector,(0,1))", "(vector,(0,a,1))", "(vector,(0,1,1)", "vector,(0,1,1))"} {
		if nodes, err := NodesOf(m, 4); err == nil {
			t.Errorf("NodesOf(%q) = %v, want an error", m, nodes)
		}
	}
}

// checkMPICHReads expands mapping the way MPICH 4.0's
// MPIR_NODEMAP_populate_ids_from_mapping does and compares with p.
func checkMPICHReads(t *testing.T, what, mapping string, p *Placement) {
	t.Helper()
	blocks, err := parseMappingLikeMPICH(mapping)
	if err != nil {
		t.Errorf("%s: mapping %q: %v", what, mapping, err)
		return
	}
	got := make([]int, 0, len(p.Ranks))
	wrapped := false
	for guard := 0; len(got) < len(p.Ranks); guard++ {
		if guard > len(p.Ranks) {
			t.Errorf("%s: mapping %q assigns no ranks", what, mapping)
			return
		}
		b := 0
		for wrapped && b < len(blocks) && blocks[b].start != 0 {
			b++
		}
	fill:
		for ; b < len(blocks); b++ {
			if blocks[b].start == 0 {
				wrapped = true
			}
			for n := 0; n < blocks[b].nodes; n++ {
				for k := 0; k < blocks[b].size; k++ {
					got = append(got, blocks[b].start+n)
					if len(got) == len(p.Ranks) {
						break fill
					}
				}
			}
		}
	}
	for r, rp := range p.Ranks {
		if got[r] != rp.Node {
			t.Errorf("%s: mapping %s puts rank %d on node %d, placement on %d", what, mapping, r, got[r], rp.Node)
			return
		}
	}
}

// parseMappingLikeMPICH parses "(vector,(a,b,c),...)".
func parseMappingLikeMPICH(s string) ([]mapBlock, error) {
	inner, ok := strings.CutPrefix(s, "(vector,")
	if !ok {
		return nil, fmt.Errorf("no (vector, prefix")
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return nil, fmt.Errorf("no closing paren")
	}
	var out []mapBlock
	for _, tri := range strings.Split(inner, "),(") {
		tri = strings.Trim(tri, "()")
		f := strings.Split(tri, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("triple %q", tri)
		}
		var v [3]int
		for i := range f {
			n, err := strconv.Atoi(f[i])
			if err != nil {
				return nil, err
			}
			v[i] = n
		}
		out = append(out, mapBlock{v[0], v[1], v[2]})
	}
	return out, nil
}

// TestPlaceLocal: a job on this machine runs on this host, or on k test
// nodes named node0…, its ranks in blocks.
func TestPlaceLocal(t *testing.T) {
	host, _ := os.Hostname()
	if got := LocalNodes(1); len(got) != 1 || (host != "" && got[0] != host) {
		t.Errorf("one node: %v, want this host %q", got, host)
	}
	pl, err := PlaceLocal(3, 7)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for i, nd := range pl.Nodes {
		if want := "node" + strconv.Itoa(i); nd.Name != want {
			t.Errorf("node %d named %q, want %q", i, nd.Name, want)
		}
		got = append(got, nd.Ranks)
	}
	if want := [][]int{{0, 1, 2}, {3, 4, 5}, {6}}; !reflect.DeepEqual(got, want) {
		t.Errorf("ranks by node %v, want %v", got, want)
	}
}

// TestPlacementNodeNames: a placement's nodes in order; without one, this
// machine's test nodes.
func TestPlacementNodeNames(t *testing.T) {
	p := &Placement{Nodes: []NodePlace{{Name: "b"}, {Name: "a"}}}
	var none *Placement
	if got := p.NodeNames(3); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("NodeNames() = %v, want [b a]", got)
	}
	if got := none.NodeNames(2); !reflect.DeepEqual(got, []string{"node0", "node1"}) {
		t.Errorf("no placement, 2 test nodes: %v", got)
	}
}

// TestPlacementSlots: each node's known slot count by name; a node whose
// count is not known has none, and no placement gives none.
func TestPlacementSlots(t *testing.T) {
	p := &Placement{Nodes: []NodePlace{{Name: "a", Slots: 4}, {Name: "b"}, {Name: "c", Slots: 1}}}
	if got := p.Slots(); !reflect.DeepEqual(got, map[string]int{"a": 4, "c": 1}) {
		t.Errorf("Slots() = %v", got)
	}
	var none *Placement
	if none.Slots() != nil {
		t.Error("a nil placement has slots")
	}
}
