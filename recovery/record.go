package recovery

import "github.com/ftlaunch/ftlaunch/raftstore"

// The planner's checkpoint (Checkpoint) is replicated as raftstore's typed
// recovery record (State.Recovery): the planner owns what it records and
// how a successor's planner reads it back (Restore); raftstore only keeps
// it.

// Record is the checkpoint as the state log keeps it
// (raftstore.SetRecovery; launch/journal's RecoveryPhase.Record).
func (rec Checkpoint) Record() raftstore.Recovery {
	r := raftstore.Recovery{Epoch: rec.Epoch, Version: rec.Version, Restarts: rec.Restarts, Alone: rec.Alone}
	if rec.Stage != 0 {
		r.Stage = rec.Stage.String()
	}
	for _, rr := range rec.Ranks {
		r.Ranks = append(r.Ranks, raftstore.RecoveryRank(rr)) // the same fields
	}
	for _, ar := range rec.Agents {
		r.Agents = append(r.Agents, raftstore.RecoveryAgent{Agent: ar.Agent, Node: ar.Node, Incarnation: ar.Incarnation,
			Restarts: ar.Restarts, Lost: ar.Lost, Up: ar.Up, Unfenced: fenceRecords(ar.Unfenced), Fenced: fenceRecords(ar.Fenced)})
	}
	return r
}

// CheckpointOf is the checkpoint a successor's planner restores: the
// recovery the state records (false: none was), at the epoch its
// commands carried, which the agents count their collectives under (the
// state's own may be a later takeover's). A stage this build does not
// know is carried on as settled.
func CheckpointOf(st *raftstore.State) (Checkpoint, bool) {
	r := st.Recovery
	if r == nil {
		return Checkpoint{}, false
	}
	rec := Checkpoint{Epoch: r.Epoch, Version: r.Version, Restarts: r.Restarts, Alone: r.Alone}
	for s := StageSuspend; s <= StageRelaunch; s++ {
		if r.Stage == s.String() {
			rec.Stage = s
		}
	}
	for _, rr := range r.Ranks {
		rec.Ranks = append(rec.Ranks, RankRecord(rr))
	}
	for _, ar := range r.Agents {
		rec.Agents = append(rec.Agents, AgentRecord{Agent: ar.Agent, Node: ar.Node, Incarnation: ar.Incarnation,
			Restarts: ar.Restarts, Lost: ar.Lost, Up: ar.Up, Unfenced: fencesOf(ar.Unfenced), Fenced: fencesOf(ar.Fenced)})
	}
	return rec, true
}

func fenceRecords(fs []FenceRecord) []raftstore.FenceRecord {
	var out []raftstore.FenceRecord
	for _, f := range fs {
		out = append(out, raftstore.FenceRecord{Node: f.Node, Incarnation: f.Incarnation, How: string(f.How)})
	}
	return out
}

func fencesOf(fs []raftstore.FenceRecord) []FenceRecord {
	var out []FenceRecord
	for _, f := range fs {
		out = append(out, FenceRecord{Node: f.Node, Incarnation: f.Incarnation, How: FenceHow(f.How)})
	}
	return out
}

// ResumeConfig is cfg for the planner of a root that took over, as the
// replicated state st has the ranks: each one's incarnation (under Rank,
// its restart count too: a rank's restarts are its respawns, each patched
// into the table as the next incarnation; a rank the last record is about
// gets its count from the record, Restore), and whether the first node
// table was published.
func ResumeConfig(cfg Config, st *raftstore.State) Config {
	cfg.Resumed, cfg.Launching = true, false
	cfg.Incarnations, cfg.RankRestarts = make([]uint64, cfg.Ranks), nil
	if cfg.Policy == Rank {
		cfg.RankRestarts = make([]int, cfg.Ranks)
	}
	for r := range min(len(st.Ranks), cfg.Ranks) {
		row := st.Ranks[r]
		cfg.Incarnations[r] = row.Incarnation
		if cfg.RankRestarts != nil && row.Incarnation > 1 {
			cfg.RankRestarts[r] = int(row.Incarnation - 1)
		}
		cfg.TableReady = cfg.TableReady || row.ITuple != nil
	}
	return cfg
}
