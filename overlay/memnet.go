package overlay

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// MemConfig configures a [MemNetwork]. The zero value is a lossless,
// immediate network with inboxes of [DefaultInbox] messages.
type MemConfig struct {
	// Inbox bounds the number of messages queued for one endpoint
	// (<= 0 means DefaultInbox). A message sent to a full inbox is
	// dropped and Send returns an error wrapping ErrBackpressure; a
	// delayed message that finds the inbox full is dropped silently and
	// counted in MemStats.Overflow.
	Inbox int
	// Seed drives every random choice of the network (loss and delay).
	// Two networks with the same seed and the same sequence of Send calls
	// make the same choices.
	Seed uint64
	// Loss is the fraction of messages dropped silently, in [0, 1].
	Loss float64
	// MinDelay and MaxDelay bound a uniformly random delivery delay. With
	// MaxDelay == 0 messages are delivered during Send. Delayed messages
	// may overtake each other.
	MinDelay, MaxDelay time.Duration
}

// DefaultInbox is the inbox bound of a MemNetwork endpoint when
// MemConfig.Inbox is not set.
const DefaultInbox = 4096

// MemStats counts what a MemNetwork did with the messages sent through it.
type MemStats struct {
	Delivered uint64 // put into an inbox
	Lost      uint64 // dropped by the configured loss
	Cut       uint64 // dropped by a crash or a partition
	Overflow  uint64 // dropped because the receiver's inbox was full
}

// MemNetwork is an in-memory network of [MemEndpoint]s, for tests and
// benchmarks. It copies every payload, bounds every inbox, and never blocks
// a sender. It can crash a node (all its traffic is dropped both ways,
// silently, like a powered-off host), cut and heal the link between two
// nodes, drop a fraction of messages and delay them, all driven by a seed.
//
// All methods are safe for concurrent use. A network with delays runs one
// goroutine for delayed deliveries; Close stops it and waits for it.
type MemNetwork struct {
	mu       sync.Mutex
	cfg      MemConfig
	rng      *rand.Rand
	eps      map[int]*MemEndpoint
	crashed  map[int]bool
	cut      map[[2]int]bool
	stats    MemStats
	closed   bool
	delayed  delayHeap
	delaySeq uint64
	wake     chan struct{}
	stop     chan struct{}
	running  bool
	wg       sync.WaitGroup
}

// NewMemNetwork returns an empty network.
func NewMemNetwork(cfg MemConfig) *MemNetwork {
	if cfg.Inbox <= 0 {
		cfg.Inbox = DefaultInbox
	}
	return &MemNetwork{
		cfg:     cfg,
		rng:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		eps:     make(map[int]*MemEndpoint),
		crashed: make(map[int]bool),
		cut:     make(map[[2]int]bool),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
}

// Endpoint creates the endpoint of node id. Each id has at most one
// endpoint over the life of the network.
func (n *MemNetwork) Endpoint(id int) (*MemEndpoint, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("mem endpoint %d: %w", id, ErrClosed)
	}
	if _, ok := n.eps[id]; ok {
		return nil, fmt.Errorf("mem endpoint %d: already exists", id)
	}
	ep := &MemEndpoint{net: n, id: id, inbox: make(chan Message, n.cfg.Inbox), done: make(chan struct{})}
	n.eps[id] = ep
	return ep, nil
}

// Crash makes node id behave as a crashed host: everything it sends and
// everything sent to it is dropped silently, and the messages already in
// its inbox are discarded. Its endpoint stays open.
func (n *MemNetwork) Crash(id int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.crashed[id] = true
	if ep, ok := n.eps[id]; ok {
		for {
			select {
			case <-ep.inbox:
				n.stats.Cut++
				continue
			default:
			}
			break
		}
	}
}

// Revive undoes Crash: node id sends and receives again (like a host
// that came back with the same id; what it missed stays lost).
func (n *MemNetwork) Revive(id int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.crashed, id)
}

// Partition cuts the link between a and b in both directions: their
// messages to each other are dropped silently until Heal.
func (n *MemNetwork) Partition(a, b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[linkKey(a, b)] = true
}

// Heal restores the link between a and b.
func (n *MemNetwork) Heal(a, b int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, linkKey(a, b))
}

// SetLoss changes the fraction of messages dropped silently.
func (n *MemNetwork) SetLoss(frac float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg.Loss = frac
}

// SetDelay changes the bounds of the random delivery delay.
func (n *MemNetwork) SetDelay(min, max time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cfg.MinDelay, n.cfg.MaxDelay = min, max
}

// Stats returns a snapshot of the network's counters.
func (n *MemNetwork) Stats() MemStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close closes every endpoint, discards delayed messages and waits for the
// delivery goroutine to end. It is idempotent.
func (n *MemNetwork) Close() error {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.stop)
		for _, ep := range n.eps {
			ep.closeLocked()
		}
		n.delayed = nil
	}
	n.mu.Unlock()
	n.wg.Wait()
	return nil
}

func linkKey(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// send implements MemEndpoint.Send.
func (n *MemNetwork) send(from, to int, msg []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	src := n.eps[from]
	if n.closed || src.isClosed() {
		return fmt.Errorf("send from %d: %w", from, ErrClosed)
	}
	dst, ok := n.eps[to]
	if !ok || dst.isClosed() {
		return fmt.Errorf("send %d -> %d: %w", from, to, ErrUnreachable)
	}
	if n.dropLocked(from, to) {
		n.stats.Cut++
		return nil
	}
	if n.cfg.Loss > 0 && n.rng.Float64() < n.cfg.Loss {
		n.stats.Lost++
		return nil
	}
	m := Message{From: from, Payload: append([]byte(nil), msg...)}
	if n.cfg.MaxDelay > 0 {
		d := n.cfg.MinDelay
		if span := n.cfg.MaxDelay - n.cfg.MinDelay; span > 0 {
			d += time.Duration(n.rng.Int64N(int64(span) + 1))
		}
		n.delaySeq++
		heap.Push(&n.delayed, delayedMsg{at: time.Now().Add(d), seq: n.delaySeq, to: to, m: m})
		if !n.running {
			n.running = true
			n.wg.Add(1)
			go n.deliverDelayed()
		}
		select {
		case n.wake <- struct{}{}:
		default:
		}
		return nil
	}
	select {
	case dst.inbox <- m:
		n.stats.Delivered++
		return nil
	default:
		n.stats.Overflow++
		return fmt.Errorf("send %d -> %d: inbox of %d messages full: %w", from, to, cap(dst.inbox), ErrBackpressure)
	}
}

func (n *MemNetwork) dropLocked(from, to int) bool {
	return n.crashed[from] || n.crashed[to] || n.cut[linkKey(from, to)]
}

// deliverDelayed owns the delayed messages: it hands each to its inbox when
// its time comes, until Close.
func (n *MemNetwork) deliverDelayed() {
	defer n.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		n.mu.Lock()
		now := time.Now()
		for len(n.delayed) > 0 && !n.delayed[0].at.After(now) {
			d := heap.Pop(&n.delayed).(delayedMsg)
			n.deliverLocked(d)
		}
		wait := time.Hour
		if len(n.delayed) > 0 {
			wait = n.delayed[0].at.Sub(now)
		}
		n.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-n.stop:
			return
		case <-n.wake:
		case <-timer.C:
		}
	}
}

func (n *MemNetwork) deliverLocked(d delayedMsg) {
	dst := n.eps[d.to]
	if dst == nil || dst.isClosed() || n.dropLocked(d.m.From, d.to) {
		n.stats.Cut++
		return
	}
	select {
	case dst.inbox <- d.m:
		n.stats.Delivered++
	default:
		n.stats.Overflow++
	}
}

type delayedMsg struct {
	at  time.Time
	seq uint64
	to  int
	m   Message
}

type delayHeap []delayedMsg

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h delayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)   { *h = append(*h, x.(delayedMsg)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// MemEndpoint is the [Transport] of one node of a [MemNetwork]. It is safe
// for concurrent use.
type MemEndpoint struct {
	net   *MemNetwork
	id    int
	inbox chan Message
	done  chan struct{} // closed by Close
	// closed is guarded by net.mu.
	closed bool
}

var _ Transport = (*MemEndpoint)(nil)

// ID returns the node id of the endpoint.
func (e *MemEndpoint) ID() int { return e.id }

// Send copies msg and queues it for node to. It never blocks: a full inbox
// drops the message and returns an error wrapping ErrBackpressure; a
// message from or to a crashed node, or across a partition, or chosen by
// the configured loss, is dropped silently (nil error).
func (e *MemEndpoint) Send(to int, msg []byte) error {
	return e.net.send(e.id, to, msg)
}

// Recv returns the next message of the inbox.
func (e *MemEndpoint) Recv(ctx context.Context) (Message, error) {
	// A message already queued is returned even after Close was called
	// concurrently; once the endpoint is closed and drained, Recv fails.
	select {
	case m := <-e.inbox:
		return m, nil
	default:
	}
	select {
	case m := <-e.inbox:
		return m, nil
	case <-e.done:
		return Message{}, fmt.Errorf("recv on %d: %w", e.id, ErrClosed)
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Close closes the endpoint. Messages sent to it afterwards fail with
// ErrUnreachable. It is idempotent.
func (e *MemEndpoint) Close() error {
	e.net.mu.Lock()
	defer e.net.mu.Unlock()
	e.closeLocked()
	return nil
}

func (e *MemEndpoint) closeLocked() {
	if !e.closed {
		e.closed = true
		close(e.done)
	}
}

func (e *MemEndpoint) isClosed() bool { return e.closed }
