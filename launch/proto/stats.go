package proto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/pmi"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// NodeStats is what an agent reports when it is done: its ranks' PMI
// traffic, answered on the node, and the bytes its PMI barriers sent up.
type NodeStats struct {
	PMI     pmi.Stats
	PMIUp   int64 // bytes of PMI barrier contributions sent to the parent
	Barrier int64 // PMI barriers the node took part in
}

func DecodeNodeStats(p []byte) (NodeStats, error) {
	d := wire.NewDecoder(p)
	var n NodeStats
	for _, v := range []*int64{&n.PMI.Requests, &n.PMI.Puts, &n.PMI.Gets, &n.PMI.Barriers, &n.PMI.Garbage, &n.PMI.BytesIn, &n.PMI.BytesOut, &n.PMIUp, &n.Barrier} {
		*v = d.Int()
	}
	return n, d.Err()
}

func (n NodeStats) Encode() []byte {
	var e wire.Encoder
	for _, v := range []int64{n.PMI.Requests, n.PMI.Puts, n.PMI.Gets, n.PMI.Barriers, n.PMI.Garbage, n.PMI.BytesIn, n.PMI.BytesOut, n.PMIUp, n.Barrier} {
		e.Int(v)
	}
	return e.Data()
}

// Words says a node's figures for --verbose.
func (n NodeStats) Words() string {
	return fmt.Sprintf("PMI %d requests (%d puts, %d gets, %d barriers) answered on the node, %d B in / %d B out; %d B sent up in %d barrier(s)",
		n.PMI.Requests, n.PMI.Puts, n.PMI.Gets, n.PMI.Barriers, n.PMI.BytesIn, n.PMI.BytesOut, n.PMIUp, n.Barrier)
}
