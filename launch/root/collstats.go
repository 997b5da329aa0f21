package root

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
)

// collStats totals the collectives this root answered: how many, the
// contributions it received for them, the agents they covered and the
// bytes it sent its children with their answers; in all and by kind.
type collStats struct {
	Answered int
	Msgs     int
	Down     int64
	kinds    map[string]*journal.CollTotal
}

func (s *collStats) add(kind string, msgs, agents int, down int64) {
	s.Answered++
	s.Msgs += msgs
	s.Down += down
	if s.kinds == nil {
		s.kinds = map[string]*journal.CollTotal{}
	}
	k := s.kinds[kind]
	if k == nil {
		k = &journal.CollTotal{Kind: kind}
		s.kinds[kind] = k
	}
	k.Count++
	k.Messages += msgs
	k.Agents += agents
	k.BytesDown += down
}

// totals returns the totals by kind, in the order of the kinds' names.
func (s *collStats) totals() []journal.CollTotal {
	var out []journal.CollTotal
	for _, k := range slices.Sorted(maps.Keys(s.kinds)) {
		out = append(out, *s.kinds[k])
	}
	return out
}

// words says the totals for --verbose: in all, then by kind.
func (s *collStats) words() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d answered; the root received %d message(s) for them and sent down %d byte(s)", s.Answered, s.Msgs, s.Down)
	for i, k := range s.totals() {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s: %d, %d message(s) covering %d agent(s), %d byte(s) down", sep, k.Kind, k.Count, k.Messages, k.Agents, k.BytesDown)
	}
	if len(s.kinds) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// cpuTime is the CPU time this process used so far (its every thread's:
// with --test-nodes the agents are processes of their own), user and
// system.
func cpuTime() (user, sys time.Duration, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
