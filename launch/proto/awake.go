package proto

import (
	"context"
	"sync"
	"time"
)

// Awake measures how long this process has been able to hear its peers.
// A process that was stopped (SIGSTOP, a VM's steal, a swap storm) or
// starved finds every link silent when it runs again, before its readers
// have drained what arrived meanwhile: silence it judges against a peer
// must count only the time it was awake throughout. A front-end stalled
// for 2 s took its live child for dead on gossip's word (its own member's,
// whose probes had timed out during the stall) the moment it resumed
// (make chaos, 2026-11-28: 1 of 40 run-phase stalls on test nodes).
//
// Run ticks every tick; a tick later than gap after the one before means
// the process did not run meanwhile, and its awake time starts again. The
// zero value is not usable: NewAwake.
type Awake struct {
	tick, gap time.Duration

	mu      sync.Mutex
	running bool      // Run ticks (a watch nobody runs bounds nothing)
	last    time.Time // the last tick
	since   time.Time // when the last gap ended
}

// AwakeTick is how often the root's and an agent's awake watch ticks: a
// stall of 4 ticks (400 ms) and more is one.
const AwakeTick = 100 * time.Millisecond

// NewAwake returns a watch that ticks every tick and takes a tick later
// than 4 ticks for a gap.
func NewAwake(tick time.Duration) *Awake {
	now := time.Now()
	return &Awake{tick: tick, gap: 4 * tick, last: now, since: now}
}

// Run ticks until ctx ends.
func (w *Awake) Run(ctx context.Context) {
	w.mu.Lock()
	w.running = true
	w.last = time.Now()
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	t := time.NewTicker(w.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.tickAt(time.Now())
		}
	}
}

func (w *Awake) tickAt(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.last) > w.gap {
		w.since = now
	}
	w.last = now
}

// For returns how long the process has been awake throughout at now: 0
// while the ticker itself is late (the process is only now running
// again); no bound from a watch that is nil or not running.
func (w *Awake) For(now time.Time) time.Duration {
	if w == nil {
		return time.Duration(1<<63 - 1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return time.Duration(1<<63 - 1)
	}
	if now.Sub(w.last) > w.gap {
		return 0
	}
	return now.Sub(w.since)
}
