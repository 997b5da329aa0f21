package root

import (
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// collStats totals the collectives this root answered (proto.CollStats);
// totals are what the state log records of them (journal.go).
type collStats struct{ proto.CollStats }

func (s *collStats) totals() []journal.CollTotal { return s.Totals() }
