package membership

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrShutdown is returned by operations on a Member after Shutdown.
var ErrShutdown = errors.New("membership: member is shut down")

// MinSecretLen is the shortest job secret Start accepts.
const MinSecretLen = 16

// keyInfo is the HKDF context string: it binds the derived key to this use,
// so the same job secret can key other things without sharing a key.
const keyInfo = "ftlaunch membership gossip key v1"

// DeriveKey derives the 32-byte AES-256 gossip key from a job secret with
// HKDF-SHA-256. Every agent of a job derives the same key; a member keyed
// from another secret can neither join nor read the gossip.
func DeriveKey(secret []byte) ([]byte, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("membership: job secret is %d bytes, need at least %d", len(secret), MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, keyInfo, 32)
	if err != nil {
		return nil, fmt.Errorf("membership: derive gossip key: %w", err)
	}
	return key, nil
}

// Config describes one member. Name, Incarnation and Secret are required.
type Config struct {
	// Name is the agent's name, unique in the job; it is the memberlist
	// node name.
	Name string
	// Incarnation is the agent's boot incarnation (> 0), advertised in
	// node metadata so that evidence names the incarnation it is about.
	Incarnation uint64
	// Role is the agent's role, advertised in node metadata (at most
	// MaxRoleLen bytes).
	Role string
	// Secret is the job secret; the gossip key is DeriveKey(Secret).
	Secret []byte
	// Label, if set, is memberlist's cluster label (for example the job
	// id): packets carrying another label are refused before decryption.
	Label string

	// BindAddr and BindPort are where memberlist listens (UDP and TCP on
	// the same port). BindAddr "" means "0.0.0.0"; BindPort 0 picks a free
	// port, reported by Member.Addr. Ignored when Transport is set.
	BindAddr string
	BindPort int
	// AdvertiseAddr, if set, is the address announced to peers instead of
	// the bound one.
	AdvertiseAddr string
	// Transport, if set, replaces memberlist's UDP/TCP transport (for
	// example a MemTransport). Start takes ownership: Shutdown shuts it down.
	Transport memberlist.Transport

	// Seeds are host:port addresses of members to join. Empty: start a new
	// cluster.
	Seeds []string

	// Profile is the timing profile; nil means ClusterProfile(). Start
	// copies it and never modifies the caller's value.
	Profile *memberlist.Config
	// QueueLimit bounds pending evidence (see the queue's overflow policy);
	// 0 means 1024.
	QueueLimit int
	// SuspectPoll is how often the member looks for peers that became
	// suspect (memberlist has no event for it); 0 means the profile's
	// ProbeInterval.
	SuspectPoll time.Duration
	// LogOutput receives memberlist's log; nil discards it.
	LogOutput io.Writer
}

// Member is one agent's membership in the job's gossip cluster.
//
// All methods are safe for concurrent use. Evidence is delivered on Events by
// a goroutine the Member owns; the channel is closed when Shutdown has
// stopped that goroutine. Evidence still queued at Shutdown is discarded.
type Member struct {
	name    string
	ml      *memberlist.Memberlist
	q       *queue
	events  chan Evidence
	stop    chan struct{}
	wg      sync.WaitGroup
	poll    time.Duration
	leaveTO time.Duration

	lifeMu  sync.Mutex // serializes Leave and Shutdown
	left    bool
	stopped bool
}

// Start creates a member, and if cfg.Seeds is not empty joins the cluster,
// retrying until at least one seed answers or ctx is done. On error nothing
// is left running.
func Start(ctx context.Context, cfg Config) (*Member, error) {
	if cfg.Name == "" {
		return nil, errors.New("membership: empty member name")
	}
	if cfg.Incarnation == 0 {
		return nil, fmt.Errorf("membership: member %s: incarnation must be > 0", cfg.Name)
	}
	meta, err := encodeMeta(nodeMeta{Incarnation: cfg.Incarnation, Role: cfg.Role})
	if err != nil {
		return nil, fmt.Errorf("membership: member %s: %w", cfg.Name, err)
	}
	key, err := DeriveKey(cfg.Secret)
	if err != nil {
		return nil, fmt.Errorf("membership: member %s: %w", cfg.Name, err)
	}
	base := cfg.Profile
	if base == nil {
		base = ClusterProfile()
	}
	mc := *base // shallow copy: the fields set below are the only ones written
	mc.Name = cfg.Name
	mc.Label = cfg.Label
	mc.BindAddr = cfg.BindAddr
	if mc.BindAddr == "" {
		mc.BindAddr = "0.0.0.0"
	}
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.BindPort
	mc.Transport = cfg.Transport
	mc.SecretKey = key
	mc.Keyring = nil
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	mc.Logger = nil
	mc.LogOutput = cfg.LogOutput
	if mc.LogOutput == nil {
		mc.LogOutput = io.Discard
	}

	limit := cfg.QueueLimit
	if limit == 0 {
		limit = 1024
	}
	m := &Member{
		name:    cfg.Name,
		q:       newQueue(limit),
		events:  make(chan Evidence),
		stop:    make(chan struct{}),
		poll:    cfg.SuspectPoll,
		leaveTO: 10 * mc.GossipInterval,
	}
	if m.poll <= 0 {
		m.poll = mc.ProbeInterval
	}
	mc.Delegate = &metaDelegate{meta: meta}
	mc.Events = &eventDelegate{self: cfg.Name, q: m.q}

	ml, err := memberlist.Create(&mc)
	if err != nil {
		if cfg.Transport != nil {
			_ = cfg.Transport.Shutdown()
		}
		return nil, fmt.Errorf("membership: start member %s: %w", cfg.Name, err)
	}
	m.ml = ml
	m.wg.Add(2)
	go m.dispatch()
	go m.pollSuspects()

	if len(cfg.Seeds) > 0 {
		if _, err := m.Join(ctx, cfg.Seeds); err != nil {
			_ = m.Shutdown()
			return nil, err
		}
	}
	return m, nil
}

// Join contacts seeds (host:port) and merges state with every one that
// answers, retrying with backoff until at least one answers or ctx is done.
// It returns the number of seeds contacted.
func (m *Member) Join(ctx context.Context, seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, fmt.Errorf("membership: member %s: join with no seeds", m.name)
	}
	delay := 50 * time.Millisecond
	for {
		if m.isStopped() {
			return 0, ErrShutdown
		}
		n, err := m.ml.Join(seeds)
		if n > 0 {
			return n, nil
		}
		if err == nil {
			err = errors.New("no seed answered")
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("membership: member %s: join %v: %w (last error: %v)", m.name, seeds, ctx.Err(), err)
		case <-m.stop:
			t.Stop()
			return 0, ErrShutdown
		case <-t.C:
		}
		delay = min(2*delay, time.Second)
	}
}

func (m *Member) isStopped() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// Name returns the member's node name.
func (m *Member) Name() string { return m.name }

// Addr returns the address peers use to reach this member (host:port); with
// BindPort 0 it carries the port that was picked.
func (m *Member) Addr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Events returns the channel on which evidence is delivered, in the order
// observed (after coalescing, see QueueStats). It is closed after Shutdown.
// A slow reader never blocks memberlist: evidence waits in the queue.
func (m *Member) Events() <-chan Evidence { return m.events }

// QueueStats reports what the evidence queue has done so far.
func (m *Member) QueueStats() QueueStats { return m.q.snapshot() }

// Peer is a snapshot of one member as this member sees it.
type Peer struct {
	Name        string
	Addr        string
	Incarnation uint64
	Role        string
	Kind        Kind // KindAlive or KindSuspect
}

// Members returns the members this member believes alive or suspect,
// itself included.
func (m *Member) Members() []Peer {
	nodes := m.ml.Members()
	out := make([]Peer, 0, len(nodes))
	for _, n := range nodes {
		meta, _ := decodeMeta(n.Meta)
		k := KindAlive
		if n.State == memberlist.StateSuspect {
			k = KindSuspect
		}
		out = append(out, Peer{Name: n.Name, Addr: n.Address(), Incarnation: meta.Incarnation, Role: meta.Role, Kind: k})
	}
	return out
}

// NumMembers returns the number of members believed alive or suspect,
// itself included.
func (m *Member) NumMembers() int { return m.ml.NumMembers() }

// Leave announces a graceful departure and waits until the announcement has
// been gossiped or ctx is done (without a deadline, at most ten gossip
// intervals). Peers report this member as KindLeft. The member keeps
// running until Shutdown. Leave is idempotent; after Shutdown it returns
// ErrShutdown.
func (m *Member) Leave(ctx context.Context) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.stopped {
		return ErrShutdown
	}
	if m.left {
		return nil
	}
	timeout := m.leaveTO
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	if timeout <= 0 {
		return fmt.Errorf("membership: member %s: leave: %w", m.name, context.DeadlineExceeded)
	}
	m.left = true
	if err := m.ml.Leave(timeout); err != nil {
		return fmt.Errorf("membership: member %s: leave: %w", m.name, err)
	}
	return nil
}

// Shutdown stops the member without a goodbye (peers will eventually report
// it dead unless Leave was called first), shuts down its transport and waits
// for the member's goroutines to exit. It is idempotent.
func (m *Member) Shutdown() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.stopped {
		return nil
	}
	m.stopped = true
	err := m.ml.Shutdown()
	close(m.stop)
	m.wg.Wait()
	if err != nil {
		return fmt.Errorf("membership: member %s: shutdown: %w", m.name, err)
	}
	return nil
}

// dispatch moves evidence from the queue to the Events channel. It is the
// only sender on m.events and closes it on exit.
func (m *Member) dispatch() {
	defer m.wg.Done()
	defer close(m.events)
	for {
		select {
		case <-m.q.ready:
		case <-m.stop:
			return
		}
		for {
			e, ok := m.q.pop()
			if !ok {
				break
			}
			select {
			case m.events <- e:
			case <-m.stop:
				return
			}
		}
	}
}

// pollSuspects turns memberlist's alive->suspect and suspect->alive
// transitions, for which memberlist has no event, into evidence. Its map is
// owned by this goroutine alone.
func (m *Member) pollSuspects() {
	defer m.wg.Done()
	t := time.NewTicker(m.poll)
	defer t.Stop()
	suspect := make(map[string]bool)
	for {
		select {
		case <-t.C:
		case <-m.stop:
			return
		}
		seen := make(map[string]bool, len(suspect))
		for _, n := range m.ml.Members() {
			if n.Name == m.name {
				continue
			}
			isSuspect := n.State == memberlist.StateSuspect
			if isSuspect {
				seen[n.Name] = true
			}
			switch {
			case isSuspect && !suspect[n.Name]:
				m.q.push(evidenceOf(n, KindSuspect, m.name))
			case !isSuspect && suspect[n.Name]:
				m.q.push(evidenceOf(n, KindAlive, m.name))
			}
		}
		suspect = seen
	}
}

// evidenceOf builds evidence about n. It copies everything it keeps: n
// belongs to memberlist.
func evidenceOf(n *memberlist.Node, k Kind, observer string) Evidence {
	meta, _ := decodeMeta(n.Meta) // unreadable metadata: incarnation 0
	return Evidence{
		Node:        n.Name,
		Incarnation: meta.Incarnation,
		Role:        meta.Role,
		Addr:        net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))),
		Kind:        k,
		Time:        time.Now(),
		Observer:    observer,
	}
}

// eventDelegate receives memberlist's join/leave/update events. memberlist
// calls it with its node lock held and never concurrently; every method only
// pushes onto the queue, which never blocks and never calls memberlist.
type eventDelegate struct {
	self string
	q    *queue
}

func (d *eventDelegate) NotifyJoin(n *memberlist.Node) {
	if n.Name != d.self {
		d.q.push(evidenceOf(n, KindAlive, d.self))
	}
}

func (d *eventDelegate) NotifyLeave(n *memberlist.Node) {
	if n.Name == d.self {
		return
	}
	k := KindDead
	if n.State == memberlist.StateLeft {
		k = KindLeft
	}
	d.q.push(evidenceOf(n, k, d.self))
}

// NotifyUpdate fires when a peer's metadata changed, that is when an agent
// of the same name booted again with a new incarnation.
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) {
	if n.Name != d.self {
		d.q.push(evidenceOf(n, KindAlive, d.self))
	}
}

// metaDelegate advertises the member's metadata and ignores user messages
// (membership sends none). Its fields are immutable after Start.
type metaDelegate struct {
	meta []byte
}

func (d *metaDelegate) NodeMeta(limit int) []byte {
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}

// NotifyMsg ignores user messages; it must not block and keeps no
// reference to b.
func (d *metaDelegate) NotifyMsg(b []byte) {}

func (d *metaDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

func (d *metaDelegate) LocalState(join bool) []byte { return nil }

func (d *metaDelegate) MergeRemoteState(buf []byte, join bool) {}
