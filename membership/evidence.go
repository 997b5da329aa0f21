package membership

import (
	"fmt"
	"sync"
	"time"
)

// Kind is what an observer believes about a peer.
type Kind uint8

// The kinds of evidence. Dead and Left are terminal for an incarnation;
// Alive and Suspect are not.
const (
	// KindAlive: the peer joined, or refuted a suspicion, or rejoined
	// after being declared dead. An Alive with a higher Incarnation than
	// the root has on record means the older incarnation is gone.
	KindAlive Kind = iota + 1
	// KindSuspect: a probe of the peer failed; memberlist is waiting for
	// it to refute before declaring it dead.
	KindSuspect
	// KindDead: the suspicion timed out (or another member's dead
	// message arrived). The peer did not say goodbye.
	KindDead
	// KindLeft: the peer announced a graceful leave.
	KindLeft
)

func (k Kind) String() string {
	switch k {
	case KindAlive:
		return "alive"
	case KindSuspect:
		return "suspect"
	case KindDead:
		return "dead"
	case KindLeft:
		return "left"
	default:
		return fmt.Sprintf("kind(%d)", uint8(k))
	}
}

// terminal reports whether k ends an incarnation's life.
func (k Kind) terminal() bool { return k == KindDead || k == KindLeft }

// Evidence is one observation by one member about a peer. It is evidence,
// not a decision: the root de-duplicates reports by (Node, Incarnation) and
// decides.
type Evidence struct {
	Node        string    // the peer's agent name (its memberlist node name)
	Incarnation uint64    // the peer's boot incarnation; 0 if its metadata was unreadable
	Role        string    // the peer's role, from its metadata
	Addr        string    // the peer's gossip address, host:port
	Kind        Kind      // what the observer believes
	Time        time.Time // when the observer learned it
	Observer    string    // the name of the member that made the observation
}

func (e Evidence) String() string {
	return fmt.Sprintf("%s saw %s#%d %s at %s", e.Observer, e.Node, e.Incarnation, e.Kind, e.Time.Format(time.RFC3339Nano))
}

// QueueStats counts what the evidence queue did.
type QueueStats struct {
	Pushed    uint64 // observations offered to the queue
	Coalesced uint64 // observations merged into a pending one for the same node
	Evicted   uint64 // pending alive/suspect observations discarded for lack of room
	Stale     uint64 // suspect observations discarded because the same incarnation was already reported dead or left
	MaxLen    int    // the longest the queue has been
}

// queue is the bounded buffer between memberlist's delegates (which must
// never block) and the consumer of Member.Events.
//
// Overflow policy:
//   - A new Alive or Suspect for a node whose newest pending entry is Alive or
//     Suspect replaces that entry in place (the consumer sees the latest state
//     at the position of the first unread one). Flapping therefore costs one
//     slot per node.
//   - Dead and Left are never dropped and never replaced; a second terminal
//     observation of the same (node, incarnation) is a duplicate and merged.
//   - A Suspect that arrives after a pending terminal entry of the same
//     incarnation is stale and discarded.
//   - When the queue holds limit entries and a new entry must be appended, the
//     oldest pending Alive/Suspect is evicted to make room. If every entry is
//     terminal the queue grows past limit: terminal entries are at most one
//     per (node, incarnation), so memory stays bounded by the agents that
//     really booted.
//
// push and pop are safe for concurrent use; push never blocks beyond the
// queue's own mutex.
type queue struct {
	mu    sync.Mutex
	items []Evidence
	limit int
	stats QueueStats
	ready chan struct{} // capacity 1: "items may be non-empty"
}

func newQueue(limit int) *queue {
	if limit < 1 {
		limit = 1
	}
	return &queue{limit: limit, ready: make(chan struct{}, 1)}
}

func (q *queue) push(e Evidence) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.stats.Pushed++
	last := -1
	for i := len(q.items) - 1; i >= 0; i-- {
		if q.items[i].Node == e.Node {
			last = i
			break
		}
	}
	if last >= 0 {
		p := q.items[last]
		switch {
		case !p.Kind.terminal():
			q.items[last] = e
			q.stats.Coalesced++
			q.signal()
			return
		case e.Kind.terminal() && p.Incarnation == e.Incarnation:
			q.stats.Coalesced++
			return
		case e.Kind == KindSuspect && p.Incarnation == e.Incarnation:
			q.stats.Stale++
			return
		}
	}
	if len(q.items) >= q.limit {
		for i := range q.items {
			if !q.items[i].Kind.terminal() {
				q.items = append(q.items[:i], q.items[i+1:]...)
				q.stats.Evicted++
				break
			}
		}
	}
	q.items = append(q.items, e)
	q.stats.MaxLen = max(q.stats.MaxLen, len(q.items))
	q.signal()
}

// signal wakes the consumer; the caller holds q.mu.
func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *queue) pop() (Evidence, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return Evidence{}, false
	}
	e := q.items[0]
	q.items[0] = Evidence{}
	q.items = q.items[1:]
	if len(q.items) == 0 {
		q.items = nil
	}
	return e, true
}

func (q *queue) snapshot() QueueStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stats
}
