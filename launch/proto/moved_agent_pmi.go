package proto

import (
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

func (n NodeStats) Encode() []byte {
	var e wire.Encoder
	for _, v := range []int64{n.PMI.Requests, n.PMI.Puts, n.PMI.Gets, n.PMI.Barriers, n.PMI.Garbage, n.PMI.BytesIn, n.PMI.BytesOut, n.PMIUp, n.Barrier} {
		e.Int(v)
	}
	return e.Data()
}
