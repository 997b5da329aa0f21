package journal

// Raft's stream layer over the job's mutual TLS, for the front-end's and
// the replica agents' replicas alike.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The root replica group (--replicas R > 1). Replica 0 is the front-end's
// journal; replicas 1..R-1 are agents the plan names (the root's first
// children, on distinct nodes). The front-end's replica starts alone and
// adds each replica agent as a voter once it reports its raft address, so
// the job's state log is kept on R nodes. Raft's RPCs travel over TCP with
// the job's mutual TLS. With R > 1 the front-end's replica starts 100 ms
// into a launch that lasts, so that a launch, too, can survive the
// front-end (launch/agent/failover.go, launch/root/successor.go).

// RaftStream is raft's stream layer over the job's mutual TLS.
type RaftStream struct {
	ln    net.Listener
	creds *secure.Credentials
	adv   net.Addr    // the listener's address as others dial it
	cut   func() bool // CutWhile's (nil: never cut)
}

// NewRaftStream listens on all interfaces and advertises host (an IP).
func NewRaftStream(ctx context.Context, creds *secure.Credentials, host string) (*RaftStream, error) {
	ln, err := secure.Listen(ctx, "tcp", ":0", creds)
	if err != nil {
		return nil, fmt.Errorf("raft listener: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", advertise(ln.Addr(), host))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raft listener: %w", err)
	}
	return &RaftStream{ln: ln, creds: creds, adv: adv}, nil
}

func (s *RaftStream) Accept() (net.Conn, error) {
	c, err := s.ln.Accept()
	if err != nil || s.cut == nil {
		return c, err
	}
	return cutConn{Conn: c, cut: s.cut}, nil
}

func (s *RaftStream) Close() error   { return s.ln.Close() }
func (s *RaftStream) Addr() net.Addr { return s.adv }

func (s *RaftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if s.cut != nil && s.cut() {
		return nil, fmt.Errorf("dial %s: %w", address, errCut)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := secure.Dial(ctx, string(address), s.creds)
	if err != nil || s.cut == nil {
		return c, err
	}
	return cutConn{Conn: c, cut: s.cut}, nil
}

// RouteAddr returns this machine's IP address that reaches addr (host:port)
// as the kernel's routing table chooses it, without sending anything: the
// address a peer there can dial back. A front-end on a host of several
// networks (an emulated cluster's bridge beside the host's own interface)
// is reached by its agents on the one that routes to them, which need not
// be the first of its addresses.
func RouteAddr(addr string) (string, error) {
	c, err := net.Dial("udp", addr) // a UDP "connection" only picks the route
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", addr, err)
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || ua.IP.IsUnspecified() {
		return "", fmt.Errorf("route to %s: no local address", addr)
	}
	return ua.IP.String(), nil
}

// advertise turns a listener's address into one others can dial: the
// unspecified IP is replaced with host.
func advertise(addr net.Addr, host string) string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	if ta.IP == nil || ta.IP.IsUnspecified() {
		return net.JoinHostPort(host, fmt.Sprint(ta.Port))
	}
	return ta.String()
}

// CutWhile makes the stream drop all its traffic while cut reports true:
// dials fail, and a connection (dialled or accepted) fails its next read
// or write and closes. For tests of a root group whose front-end's raft
// traffic alone is cut (ftlaunch run's FTLAUNCH_TEST_RAFT_CUT); call it
// before the stream is used.
func (s *RaftStream) CutWhile(cut func() bool) { s.cut = cut }

// RaftCutEnv names a file: while it exists, the front-end's replica's raft
// traffic is dropped (CutWhile), its tree links left alone: for tests of a
// front-end cut off from its root group (chaos's raftcut).
const RaftCutEnv = "FTLAUNCH_TEST_RAFT_CUT"

// RaftCutFromEnv is the cut RaftCutEnv asks for (nil: none), for
// FirstOfGroup.
func RaftCutFromEnv() func() bool {
	path := os.Getenv(RaftCutEnv)
	if path == "" {
		return nil
	}
	return func() bool {
		_, err := os.Stat(path)
		return err == nil
	}
}

// cutConn is a connection of a stream with a cut.
type cutConn struct {
	net.Conn
	cut func() bool
}

func (c cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.cut() {
		c.Conn.Close()
		return 0, errCut
	}
	return n, err
}

func (c cutConn) Write(p []byte) (int, error) {
	if c.cut() {
		c.Conn.Close()
		return 0, errCut
	}
	return c.Conn.Write(p)
}

var errCut = errors.New("raft traffic cut (test)")

// FirstOfGroup makes c the first voter of a group of r replicas (3 or 5)
// whose others are agents, named agents: reached over TCP with the job's
// mutual TLS (creds), advertised at host, its replica's ID its node's (or
// node-root, an agent's name being the same), its timing the group's;
// cut, if set, drops its raft traffic while it reports true (CutWhile). It
// returns the transport, which the caller closes once the journal is
// done.
func (c *Config) FirstOfGroup(ctx context.Context, r int, creds *secure.Credentials, host string, agents []string, cut func() bool) (*raft.NetworkTransport, error) {
	layer, err := NewRaftStream(ctx, creds, host)
	if err != nil {
		return nil, err
	}
	if cut != nil {
		layer.CutWhile(cut)
	}
	tr := raftstore.NewTCPTransport(layer)
	if slices.Contains(agents, c.Node) { // replica IDs must differ from the agents'
		c.Node += "-root"
	}
	c.Transport, c.Timing = tr, raftstore.DefaultTiming(r)
	return tr, nil
}
