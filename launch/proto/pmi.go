package proto

import (
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// OpPMIBarrier is the collective behind a PMI-1 barrier: the node's PMI
// puts travel up with it, and the merged key space comes back down, so
// that every get after it is answered from the node's own copy. It shares
// the ranks' collective sequence with the rank protocol.
const OpPMIBarrier rankproto.Op = 100
