package root

import (
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// collStats totals the collectives this root answered: how many, the
// contributions it received for them and the bytes it sent its children
// with their answers.
type collStats struct {
	Answered int
	Msgs     int
	Down     int64
}

func (s *collStats) add(msgs int, down int64) {
	s.Answered++
	s.Msgs += msgs
	s.Down += down
}

// collKind names a collective's kind for people: the rank protocol's
// operations by their names, PMI-1's barrier as pmi-barrier.
func collKind(op rankproto.Op) string {
	if op == proto.OpPMIBarrier {
		return "pmi-barrier"
	}
	return op.String()
}
