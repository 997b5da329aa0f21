package recovery

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/topology"
)

// What a successor root's planner starts from: the replicated state alone
// (st), as journal.Resume reads it (r).

// ResumedPlanner is the planner of a root that took over: cfg (the job's, as a
// front-end's planner has it) with every rank's incarnation and restarts
// as the replicated table has them (ResumeConfig), the agents that were up
// and the ranks that ran (their processes) and ended, and the recovery
// its predecessor committed last (CheckpointOf), which it carries on once
// it leads the agents (Adopting → Leads).
func ResumedPlanner(cfg Config, st *raftstore.State, r *journal.Resumed) *Planner {
	cfg = ResumeConfig(cfg, st)
	cfg.Ended, cfg.EndedFailed = r.Ended, r.Failed
	cfg.Up = make([]bool, len(r.Agents))
	for i, ra := range r.Agents {
		cfg.Up[i] = ra.Up
	}
	cfg.RanksStarted, cfg.Pids = make([]bool, len(r.Ranks)), make([]int, len(r.Ranks))
	for x, rr := range r.Ranks {
		cfg.RanksStarted[x], cfg.Pids[x] = rr.Started, rr.PID
	}
	p := New(cfg)
	for _, x := range r.Ended {
		p.lastEnd(RankExited{Rank: x, Code: r.Ranks[x].Code}, false)
	}
	if rec, ok := CheckpointOf(st); ok {
		p.Restore(rec)
	}
	return p
}

// ResumedTree is the launch tree r records: the agents in plan order, each
// below its parent (the root when it has none) with its backup parent.
func ResumedTree(r *journal.Resumed) (*topology.Tree, error) {
	edges := make([]topology.Edge, len(r.Agents))
	for i, ra := range r.Agents {
		edges[i] = topology.Edge{Name: ra.Name, Parent: topology.Root, Backup: topology.None}
		if ra.Parent >= 0 {
			edges[i].Parent = ra.Parent
		}
		if ra.Backup >= 0 {
			edges[i].Backup = ra.Backup
		}
	}
	t, err := topology.FromEdges("replicated", edges)
	if err != nil {
		return nil, fmt.Errorf("the replicated plan: %w", err)
	}
	return t, nil
}
