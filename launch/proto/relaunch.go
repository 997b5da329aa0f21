package proto

import "github.com/ftlaunch/ftlaunch/overlay/wire"

// RelaunchSpec is what an agent started again on its node (its
// predecessor was lost) is told beyond the node's share of the job: where
// its ranks and the recovery stand. Agents launched during a recovery get
// the epoch and the node table at launch (../shared/FAULTS.md, rule 10).
type RelaunchSpec struct {
	Incarnation uint64   // the agent's own
	Incs        []uint64 // each of its ranks' incarnation that was lost, in Ranks order
	Epoch       uint64   // the recovery's: commands of older epochs are refused
	CollEpoch   uint64   // the epoch the job's collectives are counted under (the last suspension's)
	Suspended   bool     // under --restart rank: its ranks start held until the resume
	Version     uint64   // the node table's version
	Table       [][]byte // the node table (I-tuples by rank; nil before the first Publish)
}

func encodeRelaunch(e *wire.Encoder, rl *RelaunchSpec) {
	e.Bool(rl != nil)
	if rl == nil {
		return
	}
	e.Uint(rl.Incarnation).Uint(uint64(len(rl.Incs)))
	for _, inc := range rl.Incs {
		e.Uint(inc)
	}
	e.Uint(rl.Epoch).Uint(rl.CollEpoch).Bool(rl.Suspended).Uint(rl.Version).Uint(uint64(len(rl.Table)))
	for _, row := range rl.Table {
		e.Bytes(row)
	}
}

func decodeRelaunch(d *wire.Decoder) *RelaunchSpec {
	if !d.Bool() {
		return nil
	}
	rl := &RelaunchSpec{Incarnation: d.Uint()}
	n := d.Count(1)
	for range n {
		rl.Incs = append(rl.Incs, d.Uint())
	}
	rl.Epoch, rl.CollEpoch, rl.Suspended, rl.Version = d.Uint(), d.Uint(), d.Bool(), d.Uint()
	n = d.Count(1)
	for range n {
		rl.Table = append(rl.Table, d.Bytes())
	}
	return rl
}
