package membership

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// memPort is the port every in-memory endpoint uses; addresses differ by IP.
const memPort = 7946

// packetBacklog is how many packets an endpoint buffers before it drops,
// like a full UDP receive buffer.
const packetBacklog = 1024

var (
	errRefused   = errors.New("connection refused")
	errTransport = errors.New("membership: in-memory transport is shut down")
)

// NetStats counts the packets an in-memory Network carried and dropped.
type NetStats struct {
	Delivered    uint64 // packets handed to a receiver
	Lost         uint64 // packets dropped by the loss rate
	Cut          uint64 // packets dropped by a crash or a partition
	Overflow     uint64 // packets dropped because the receiver's backlog was full
	StreamsCut   uint64 // open streams closed by a crash or a partition
	DialTimeouts uint64 // dials that hung until their timeout (crashed or partitioned peer)
}

// Network is an in-memory network of MemTransports, for tests. Unlike
// memberlist's mock transport, a crashed or partitioned peer drops traffic
// silently instead of blocking its senders:
//
//   - packets to or from a crashed endpoint, or across a partition, vanish;
//   - a dial to such a peer hangs until its timeout, as a TCP connect to a
//     powered-off host does, and open streams to it are cut;
//   - a dial to an endpoint that shut down is refused at once, as a TCP
//     connect to a host whose process exited is;
//   - every packet between reachable endpoints is lost with the loss
//     probability, drawn from a generator seeded at NewNetwork (streams are
//     reliable, as TCP is). The draws are seeded, but which packet meets
//     which draw depends on goroutine scheduling.
//
// All methods are safe for concurrent use. The network owns no goroutines.
type Network struct {
	mu      sync.Mutex
	rng     *rand.Rand
	loss    float64
	next    uint32
	eps     map[string]*MemTransport // by address, until the endpoint shuts down
	crashed map[string]bool
	group   map[string]int // partition island per address; absent = 0
	links   map[*memLink]struct{}
	stats   NetStats
}

// NewNetwork returns an empty network whose loss draws are seeded by seed.
func NewNetwork(seed uint64) *Network {
	return &Network{
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		eps:     make(map[string]*MemTransport),
		crashed: make(map[string]bool),
		group:   make(map[string]int),
		links:   make(map[*memLink]struct{}),
	}
}

// NewTransport adds an endpoint with a fresh address (10.x.y.z:7946).
func (n *Network) NewTransport() (*MemTransport, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.next++
	if n.next >= 1<<24-1 {
		return nil, errors.New("membership: in-memory network out of addresses")
	}
	ip := net.IPv4(10, byte(n.next>>16), byte(n.next>>8), byte(n.next))
	t := &MemTransport{
		net:      n,
		ip:       ip,
		addr:     &net.UDPAddr{IP: ip, Port: memPort},
		hostport: net.JoinHostPort(ip.String(), strconv.Itoa(memPort)),
		packetCh: make(chan *memberlist.Packet, packetBacklog),
		streamCh: make(chan net.Conn),
		done:     make(chan struct{}),
	}
	n.eps[t.hostport] = t
	return t, nil
}

// SetLoss sets the probability in [0, 1] that a packet is lost.
func (n *Network) SetLoss(p float64) error {
	if p < 0 || p > 1 || p != p {
		return fmt.Errorf("membership: loss probability %v outside [0, 1]", p)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss = p
	return nil
}

// Crash makes the endpoint at addr go silent, as a powered-off host: from
// now on it neither sends nor receives, dials to it hang, and its open
// streams are cut. The memberlist on top keeps running, talking to no one.
// A crash is permanent.
func (n *Network) Crash(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.crashed[addr] = true
	n.cutLocked()
}

// Partition splits the network into islands: each listed group of addresses
// is one island, and every address not listed is on a common island. Only
// endpoints on the same island can talk. It replaces any earlier partition
// and cuts streams that now cross islands.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.group)
	for i, g := range groups {
		for _, a := range g {
			n.group[a] = i + 1
		}
	}
	n.cutLocked()
}

// Heal removes any partition. Crashed endpoints stay crashed.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.group)
}

// Stats returns the counters so far.
func (n *Network) Stats() NetStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// reachableLocked reports whether a can talk to b, ignoring loss.
func (n *Network) reachableLocked(a, b string) bool {
	return !n.crashed[a] && !n.crashed[b] && n.group[a] == n.group[b]
}

// cutLocked closes every stream whose ends can no longer talk.
func (n *Network) cutLocked() {
	for l := range n.links {
		if !n.reachableLocked(l.a, l.b) {
			delete(n.links, l)
			n.stats.StreamsCut++
			l.close()
		}
	}
}

// memLink is one stream between two endpoints: both ends of a net.Pipe.
type memLink struct {
	a, b   string
	c1, c2 net.Conn
}

func (l *memLink) close() {
	_ = l.c1.Close()
	_ = l.c2.Close()
}

// memConn is one end of a memLink; closing it forgets the link.
type memConn struct {
	net.Conn
	n    *Network
	link *memLink
	once sync.Once
}

func (c *memConn) Close() error {
	c.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.links, c.link)
		c.n.mu.Unlock()
	})
	return c.Conn.Close()
}

// MemTransport is one endpoint of a Network; it implements
// memberlist.Transport. It is safe for concurrent use.
type MemTransport struct {
	net      *Network
	ip       net.IP
	addr     *net.UDPAddr
	hostport string
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	done     chan struct{}
	once     sync.Once
}

var _ memberlist.Transport = (*MemTransport)(nil)

// Addr returns the endpoint's address, host:port.
func (t *MemTransport) Addr() string { return t.hostport }

// FinalAdvertiseAddr implements memberlist.Transport: the endpoint's own
// address, whatever was configured.
func (t *MemTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return t.ip, memPort, nil
}

// WriteTo implements memberlist.Transport. It copies b and never blocks.
func (t *MemTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	now := time.Now()
	n := t.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.closedLocked() {
		return now, errTransport
	}
	dst, ok := n.eps[addr]
	switch {
	case !ok:
		// Nobody there: UDP gives no error.
		n.stats.Cut++
		return now, nil
	case !n.reachableLocked(t.hostport, addr):
		n.stats.Cut++
		return now, nil
	case n.loss > 0 && n.rng.Float64() < n.loss:
		n.stats.Lost++
		return now, nil
	}
	p := &memberlist.Packet{Buf: append([]byte(nil), b...), From: t.addr, Timestamp: now}
	select {
	case dst.packetCh <- p:
		n.stats.Delivered++
	default:
		n.stats.Overflow++
	}
	return now, nil
}

// closedLocked reports whether t has shut down; the caller holds t.net.mu.
func (t *MemTransport) closedLocked() bool {
	return t.net.eps[t.hostport] != t
}

// PacketCh implements memberlist.Transport.
func (t *MemTransport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// StreamCh implements memberlist.Transport.
func (t *MemTransport) StreamCh() <-chan net.Conn { return t.streamCh }

// DialTimeout implements memberlist.Transport. A dial to a crashed or
// partitioned peer hangs until timeout; a dial to an address with no live
// endpoint is refused at once.
func (t *MemTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	n := t.net
	n.mu.Lock()
	if t.closedLocked() {
		n.mu.Unlock()
		return nil, errTransport
	}
	dst, ok := n.eps[addr]
	if !ok {
		n.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "mem", Addr: t.addr, Err: errRefused}
	}
	if !n.reachableLocked(t.hostport, addr) {
		n.stats.DialTimeouts++
		n.mu.Unlock()
		return nil, t.hang(addr, timeout)
	}
	p1, p2 := net.Pipe()
	l := &memLink{a: t.hostport, b: addr, c1: p1, c2: p2}
	n.links[l] = struct{}{}
	n.mu.Unlock()
	local := &memConn{Conn: p1, n: n, link: l}
	remote := &memConn{Conn: p2, n: n, link: l}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case dst.streamCh <- remote:
		return local, nil
	case <-dst.done:
		_ = local.Close()
		_ = remote.Close()
		return nil, &net.OpError{Op: "dial", Net: "mem", Addr: t.addr, Err: errRefused}
	case <-t.done:
		_ = local.Close()
		_ = remote.Close()
		return nil, errTransport
	case <-timer.C:
		_ = local.Close()
		_ = remote.Close()
		return nil, &net.OpError{Op: "dial", Net: "mem", Addr: t.addr, Err: errDialTimeout{addr}}
	}
}

// hang waits out a dial to an unreachable peer.
func (t *MemTransport) hang(addr string, timeout time.Duration) error {
	if timeout <= 0 {
		return &net.OpError{Op: "dial", Net: "mem", Addr: t.addr, Err: errDialTimeout{addr}}
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-timer.C:
		return &net.OpError{Op: "dial", Net: "mem", Addr: t.addr, Err: errDialTimeout{addr}}
	case <-t.done:
		return errTransport
	}
}

// errDialTimeout is a net.Error that reports a timeout.
type errDialTimeout struct{ addr string }

func (e errDialTimeout) Error() string   { return "i/o timeout dialing " + e.addr }
func (e errDialTimeout) Timeout() bool   { return true }
func (e errDialTimeout) Temporary() bool { return true }

// Shutdown implements memberlist.Transport: the endpoint leaves the network
// (later dials to its address are refused) and its open streams are closed.
// It is idempotent.
func (t *MemTransport) Shutdown() error {
	t.once.Do(func() {
		n := t.net
		n.mu.Lock()
		if n.eps[t.hostport] == t {
			delete(n.eps, t.hostport)
		}
		for l := range n.links {
			if l.a == t.hostport || l.b == t.hostport {
				delete(n.links, l)
				l.close()
			}
		}
		n.mu.Unlock()
		close(t.done)
	})
	return nil
}
