package alloc

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MapBy selects how consecutive ranks are spread over nodes.
type MapBy int

const (
	// MapBySlot fills each node's slots before moving to the next node
	// (block mapping, the default).
	MapBySlot MapBy = iota
	// MapByNode deals ranks round-robin over the nodes, one at a time.
	MapByNode
)

// ParseMapBy parses the value of --map-by: "slot" (also "core" or "") or
// "node", or Open MPI's "ppr:N:node" (N processes per node: block order
// with ppn N, which ParseMapBy returns). Open MPI's modifiers after a
// colon (":PE=2", ":oversubscribe") are not accepted.
func ParseMapBy(s string) (m MapBy, ppn int, err error) {
	switch s {
	case "", "slot", "core":
		return MapBySlot, 0, nil
	case "node":
		return MapByNode, 0, nil
	}
	if rest, ok := strings.CutPrefix(s, "ppr:"); ok {
		n, unit, _ := strings.Cut(rest, ":")
		v, err := strconv.Atoi(n)
		switch {
		case err != nil || v < 1 || v > MaxSlots:
			return 0, 0, fmt.Errorf("--map-by %q: want ppr:N:node with N in 1..%d", s, MaxSlots)
		case unit != "node":
			return 0, 0, fmt.Errorf("--map-by %q: only ppr:N:node (processes per node) is supported", s)
		}
		return MapBySlot, v, nil
	}
	return 0, 0, fmt.Errorf("--map-by %q: want slot, node or ppr:N:node", s)
}

// String returns the --map-by spelling of m.
func (m MapBy) String() string {
	if m == MapByNode {
		return "node"
	}
	return "slot"
}

// Request is what the user asked for.
type Request struct {
	// NP is the number of ranks (-n), at least 1.
	NP int
	// PPN, when positive, is the number of ranks each node takes (--ppn):
	// it replaces the allocation's slot counts and is never exceeded, even
	// with Oversubscribe.
	PPN int
	// MapBy picks block (slot) or round-robin (node) order.
	MapBy MapBy
	// Oversubscribe allows more ranks than the allocation's slots: further
	// ranks wrap around the nodes again in the same order.
	Oversubscribe bool
}

// RankPlace says where one rank runs.
type RankPlace struct {
	Node      int // index into Placement.Nodes
	LocalRank int // position of the rank among its node's ranks
	LocalSize int // number of ranks on that node
}

// NodePlace is one node that runs at least one rank.
type NodePlace struct {
	Name  string
	Ranks []int // global ranks on this node, ascending
	// Slots is how many ranks the node holds: the allocation's slot count
	// for it, else --ppn (0: not known). A node whose slots outnumber its
	// ranks has free slots, where a lost node's ranks may go
	// (docs/recovery.md, "Spares").
	Slots int
}

// Placement maps every rank to a node. Nodes holds only hosts that received
// ranks, in allocation order, so node indices are dense from 0 (as MPICH's
// node ids must be).
type Placement struct {
	Ranks []RankPlace
	Nodes []NodePlace
}

// Place assigns req.NP ranks to the hosts of a. A host without a slot count
// gets ceil(NP / hosts) slots. It returns an error for an empty allocation,
// NP outside [1, MaxRanks], a bad PPN, or more ranks than slots without
// Oversubscribe.
func Place(a Allocation, req Request) (*Placement, error) {
	hosts := a.Hosts
	if len(hosts) == 0 {
		return nil, errors.New("empty allocation: no hosts to place ranks on")
	}
	if len(hosts) > MaxHosts {
		return nil, fmt.Errorf("allocation of %d hosts exceeds the limit %d", len(hosts), MaxHosts)
	}
	if req.NP < 1 {
		return nil, fmt.Errorf("-n %d: need at least one rank", req.NP)
	}
	if req.NP > MaxRanks {
		return nil, fmt.Errorf("-n %d exceeds the limit %d", req.NP, MaxRanks)
	}
	if req.PPN < 0 || req.PPN > MaxSlots {
		return nil, fmt.Errorf("--ppn %d: want 1..%d", req.PPN, MaxSlots)
	}
	if req.MapBy != MapBySlot && req.MapBy != MapByNode {
		return nil, fmt.Errorf("unknown mapping %d", int(req.MapBy))
	}

	caps := make([]int, len(hosts))
	total := 0
	dflt := (req.NP + len(hosts) - 1) / len(hosts)
	for i, h := range hosts {
		switch {
		case req.PPN > 0:
			caps[i] = req.PPN
		case h.Slots < 0 || h.Slots > MaxSlots:
			return nil, fmt.Errorf("host %q: slot count %d out of range", h.Name, h.Slots)
		case h.Slots > 0:
			caps[i] = h.Slots
		default:
			caps[i] = dflt
		}
		total += caps[i]
	}
	if req.NP > total {
		switch {
		case req.PPN > 0:
			return nil, fmt.Errorf("-n %d does not fit --ppn %d on %d hosts (%d ranks at most)",
				req.NP, req.PPN, len(hosts), total)
		case !req.Oversubscribe:
			return nil, fmt.Errorf("-n %d exceeds the %d slots of the allocation (%d hosts); use --oversubscribe or more hosts",
				req.NP, total, len(hosts))
		}
	}

	hostOf := make([]int, req.NP) // rank -> host index
	if req.MapBy == MapBySlot {
		placeBlock(hostOf, caps)
	} else {
		placeRoundRobin(hostOf, caps)
	}
	return buildPlacement(hosts, hostOf, req.PPN), nil
}

// placeBlock fills each host up to its cap in order, wrapping around for
// ranks beyond the total (oversubscription).
func placeBlock(hostOf, caps []int) {
	r := 0
	for r < len(hostOf) {
		for h, c := range caps {
			for k := 0; k < c && r < len(hostOf); k++ {
				hostOf[r] = h
				r++
			}
		}
	}
}

// placeRoundRobin deals ranks one per host per round, dropping hosts whose
// cap is reached; once every cap is reached all hosts take part again.
func placeRoundRobin(hostOf, caps []int) {
	count := make([]int, len(caps))
	active := make([]int, len(caps))
	for i := range active {
		active[i] = i
	}
	r := 0
	for r < len(hostOf) {
		if len(active) == 0 { // oversubscribed: ignore caps from now on
			for i := range caps {
				active = append(active, i)
				caps[i] = len(hostOf)
			}
		}
		next := active[:0]
		for _, h := range active {
			if r == len(hostOf) {
				break
			}
			hostOf[r] = h
			r++
			count[h]++
			if count[h] < caps[h] {
				next = append(next, h)
			}
		}
		active = next
	}
}

// buildPlacement turns a rank -> host map into a Placement over used
// hosts, whose slots are their own count, else ppn.
func buildPlacement(hosts []Host, hostOf []int, ppn int) *Placement {
	nodeOf := make([]int, len(hosts))
	for i := range nodeOf {
		nodeOf[i] = -1
	}
	used := make([]bool, len(hosts))
	for _, h := range hostOf {
		used[h] = true
	}
	p := &Placement{Ranks: make([]RankPlace, len(hostOf))}
	for h, u := range used {
		if u {
			nodeOf[h] = len(p.Nodes)
			p.Nodes = append(p.Nodes, NodePlace{Name: hosts[h].Name, Slots: cmp.Or(max(hosts[h].Slots, 0), ppn)})
		}
	}
	for r, h := range hostOf {
		n := nodeOf[h]
		p.Ranks[r] = RankPlace{Node: n, LocalRank: len(p.Nodes[n].Ranks)}
		p.Nodes[n].Ranks = append(p.Nodes[n].Ranks, r)
	}
	for r := range p.Ranks {
		p.Ranks[r].LocalSize = len(p.Nodes[p.Ranks[r].Node].Ranks)
	}
	return p
}

// LocalNodes names the nodes of a job on this machine: k local agents
// posing as nodes (node0, node1, …: --test-nodes), or, for k ≤ 1, this
// host ("localhost" if it has no name).
func LocalNodes(k int) []string {
	if k <= 1 {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		return []string{host}
	}
	names := make([]string, k)
	for i := range names {
		names[i] = "node" + strconv.Itoa(i)
	}
	return names
}

// PlaceLocal places n ranks on the nodes of a job on this machine
// (LocalNodes(k)): in blocks of ceil(n/nodes), as mpirun does on one host
// per node.
func PlaceLocal(k, n int) (*Placement, error) {
	var hosts []Host
	for _, name := range LocalNodes(k) {
		hosts = append(hosts, Host{Name: name})
	}
	return Place(Allocation{Hosts: hosts}, Request{NP: n})
}

// NodeNames names the job's nodes in order: the placement's, or with no
// placement (nil) this machine's, k test nodes or this host (LocalNodes).
func (p *Placement) NodeNames(k int) []string {
	if p == nil {
		return LocalNodes(k)
	}
	names := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		names[i] = n.Name
	}
	return names
}

// Slots is each node's slots as the placement has them, by name (nodes
// whose count is not known are left out: they have no free slot); nil for
// no placement.
func (p *Placement) Slots() map[string]int {
	if p == nil {
		return nil
	}
	slots := map[string]int{}
	for _, n := range p.Nodes {
		if n.Slots > 0 {
			slots[n.Name] = n.Slots
		}
	}
	return slots
}
