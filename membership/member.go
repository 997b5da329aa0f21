package membership

import (
	"context"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log"
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
	// LogOutput receives memberlist's log; nil discards it. It is written
	// from memberlist's goroutines and should not block.
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
	obs     *observer
	meta    *metaDelegate
	q       *queue
	events  chan Evidence
	stop    chan struct{}
	wg      sync.WaitGroup
	leaveTO time.Duration
	gossip  time.Duration // the profile's GossipInterval
	fanout  int           // the profile's GossipNodes

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

	limit := cfg.QueueLimit
	if limit == 0 {
		limit = 1024
	}
	q := newQueue(limit)
	obs := &observer{self: cfg.Name, q: q, peers: make(map[string]peerInfo),
		suspected: make(map[string]bool), leaving: make(map[string]uint64)}
	m := &Member{
		name:    cfg.Name,
		obs:     obs,
		meta:    &metaDelegate{incarnation: cfg.Incarnation, role: cfg.Role, obs: obs},
		q:       q,
		events:  make(chan Evidence),
		stop:    make(chan struct{}),
		leaveTO: 20 * mc.GossipInterval,
		gossip:  mc.GossipInterval,
		fanout:  mc.GossipNodes,
	}
	m.meta.cur.Store(&meta)
	out := cfg.LogOutput
	if out == nil {
		out = io.Discard
	}
	mc.LogOutput = nil
	mc.Logger = log.New(&logTap{next: out, obs: obs}, "", log.LstdFlags)
	mc.Delegate = m.meta
	mc.Events = obs
	mc.Ping = obs

	ml, err := memberlist.Create(&mc)
	if err != nil {
		if cfg.Transport != nil {
			_ = cfg.Transport.Shutdown()
		}
		return nil, fmt.Errorf("membership: start member %s: %w", cfg.Name, err)
	}
	m.ml = ml
	m.wg.Add(1)
	go m.dispatch()

	if len(cfg.Seeds) > 0 {
		if _, err := m.Join(ctx, cfg.Seeds); err != nil {
			_ = m.Shutdown()
			return nil, err
		}
	}
	return m, nil
}

// LastAck is when a probe of this member's was last acked (zero: never):
// another member answered it, both ways. An agent counts it as a word from
// the job (launch/agent's self-fence).
func (m *Member) LastAck() time.Time {
	m.obs.mu.Lock()
	defer m.obs.mu.Unlock()
	return m.obs.lastAck
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
// been gossiped or ctx is done (without a deadline, at most twenty gossip
// intervals). Peers report this member as KindLeft. The member keeps
// running until Shutdown. Leave is idempotent; after Shutdown it returns
// ErrShutdown.
//
// memberlist tells its delegates that a node is gone without saying whether
// it left or died, so Leave first re-advertises the member's metadata with a
// leaving flag, sends a leave notice straight to every peer (one UDP packet
// each), waits until the flag has been sent and for the time gossip needs to
// reach every member, then leaves. A peer that hears the leave before
// either (unlikely, not impossible) reports KindDead: the safe side.
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
	deadline := time.Now().Add(timeout)
	meta, err := m.meta.setLeaving()
	if err != nil {
		return fmt.Errorf("membership: member %s: leave: %w", m.name, err)
	}
	notice, err := encodeLeaveNotice(m.name, meta)
	if err != nil {
		return fmt.Errorf("membership: member %s: leave: %w", m.name, err)
	}
	for _, n := range m.ml.Members() {
		if n.Name != m.name {
			_ = m.ml.SendBestEffort(n, notice) // best effort: the flag is gossiped too
		}
	}
	if err := m.ml.UpdateNode(timeout / 2); err != nil {
		return fmt.Errorf("membership: member %s: leave: announce: %w", m.name, err)
	}
	spread := min(spreadTime(m.gossip, m.fanout, m.ml.NumMembers()), time.Until(deadline)/2)
	if spread > 0 {
		t := time.NewTimer(spread)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("membership: member %s: leave: %w", m.name, ctx.Err())
		}
	}
	if err := m.ml.Leave(time.Until(deadline)); err != nil {
		return fmt.Errorf("membership: member %s: leave: %w", m.name, err)
	}
	return nil
}

// Shutdown stops the member without a goodbye (peers will eventually report
// it dead unless Leave was called first), shuts down its transport and waits
// for the member's own goroutine to exit. memberlist's goroutines have been
// told to stop when it returns; a few may still be finishing a stream until
// its deadline. It is idempotent.
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
