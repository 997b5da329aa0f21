package journal

// What a successor root rebuilds of the job from the replicated state
// alone: the agents in plan order, their tree, which were up, where the
// ranks run and which ended.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// Resumed is the job as the replicated state records it, for a successor
// root: Agents in plan order (the front-end's indexes), Ranks by rank,
// the ranks that Ended (and of those, those that Failed: a non-zero code),
// and the node table's I-tuples by rank once one was published (Table;
// nil: none was).
type Resumed struct {
	Agents        []ResumedAgent
	Ranks         []ResumedRank
	Ended, Failed []int
	Table         [][]byte
}

// ResumedAgent is one agent: its parent (-1: the root) and backup parent
// (-1: none) by index, whether the front-end sent it its share (Up, with
// the address it listens on), its ranks.
type ResumedAgent struct {
	Name           string
	Parent, Backup int
	Up             bool
	Addr           string
	Ranks          []int
}

// ResumedRank is one rank: its agent (-1: not recorded before the
// front-end died; the agent that runs it says so when it reports again),
// and, once reported, its PID and how it ended.
type ResumedRank struct {
	Node    int
	PID     int
	Started bool
	Ended   bool
	Code    int // its exit code, once ended
}

// Resume rebuilds a job of n ranks from st. placement, if it covers every
// agent, gives each agent's ranks (the replica spec's copy of the plan's);
// else they come from the node table.
func Resume(st *raftstore.State, n int, placement [][]int) (*Resumed, error) {
	if len(st.Plan.Nodes) < 2 {
		return nil, errors.New("no plan in the replicated state")
	}
	nodes := st.Plan.Nodes[1:] // the first is the root's
	byName := map[string]int{}
	for i, pn := range nodes {
		byName[pn.Name] = i
	}
	r := &Resumed{Agents: make([]ResumedAgent, len(nodes))}
	for i, pn := range nodes {
		a := ResumedAgent{Name: pn.Name, Parent: -1, Backup: -1}
		if p, ok := byName[pn.Primary]; ok {
			a.Parent = p
		}
		if b, ok := byName[pn.Backup]; ok {
			a.Backup = b
		}
		if ag, ok := st.Agents[pn.Name]; ok { // the front-end sent it its share
			a.Up, a.Addr = true, ag.Addr
		}
		r.Agents[i] = a
	}
	if len(st.Ranks) != n {
		return nil, fmt.Errorf("node table of %d ranks for a job of %d", len(st.Ranks), n)
	}
	r.Ranks = make([]ResumedRank, n)
	for i := range r.Ranks {
		r.Ranks[i].Node = -1
	}
	if len(placement) == len(r.Agents) {
		for i, ranks := range placement {
			for _, x := range ranks {
				if x < 0 || x >= n || r.Ranks[x].Node >= 0 {
					return nil, fmt.Errorf("placement: rank %d of node %s", x, r.Agents[i].Name)
				}
				r.Ranks[x].Node = i
			}
			r.Agents[i].Ranks = slices.Clone(ranks)
		}
	}
	for x, row := range st.Ranks {
		rr := &r.Ranks[x]
		if rr.Node < 0 {
			i, ok := byName[row.Node]
			if !ok {
				continue
			}
			rr.Node = i
			r.Agents[i].Ranks = append(r.Agents[i].Ranks, x)
		}
		if row.State == raftstore.RankUnknown {
			continue
		}
		rr.PID, rr.Started = row.PID, true
		if row.State == raftstore.RankExited || row.State == raftstore.RankFailed {
			rr.Ended, rr.Code = true, row.ExitCode
			r.Ended = append(r.Ended, x)
			if row.ExitCode != 0 {
				r.Failed = append(r.Failed, x)
			}
		}
	}
	if slices.ContainsFunc(st.Ranks, func(row raftstore.Rank) bool { return row.ITuple != nil }) {
		r.Table = make([][]byte, n)
		for x, row := range st.Ranks {
			r.Table[x] = row.ITuple
		}
	}
	return r, nil
}

// TreePlan is the plan record of a launch tree over the agents named
// names (by index): parent and backup give an agent's by index (negative:
// the root, and none), replica whether it hosts a root replica. Resume
// reads the tree back by index.
func TreePlan(kind string, names []string, parent, backup func(i int) int, replica func(i int) bool) Plan {
	p := Plan{Kind: kind, Root: RootName}
	for i, name := range names {
		n := PlanNode{Name: name, Primary: RootName}
		if x := parent(i); x >= 0 {
			n.Primary = names[x]
		}
		if x := backup(i); x >= 0 {
			n.Backup = names[x]
		}
		p.Nodes = append(p.Nodes, n)
		if replica(i) {
			p.Replicas = append(p.Replicas, name)
		}
	}
	return p
}
