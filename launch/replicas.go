package launch

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The root replica group (--replicas R > 1). Replica 0 is the front-end's
// journal; replicas 1..R-1 are agents the plan names (the root's first
// children, on distinct nodes). The front-end's replica starts alone and
// adds each replica agent as a voter once it reports its raft address, so
// the job's state log is kept on R nodes. Raft's RPCs travel over TCP with
// the job's mutual TLS. With R > 1 the front-end's replica starts 100 ms
// into a launch that lasts, so that a launch, too, can survive the
// front-end (failover.go, successor.go).

// raftStream is raft's stream layer over the job's mutual TLS.
type raftStream struct {
	ln    net.Listener
	creds *secure.Credentials
	adv   net.Addr // the listener's address as others dial it
}

// newRaftStream listens on all interfaces and advertises host (an IP).
func newRaftStream(ctx context.Context, creds *secure.Credentials, host string) (*raftStream, error) {
	ln, err := secure.Listen(ctx, "tcp", ":0", creds)
	if err != nil {
		return nil, fmt.Errorf("raft listener: %w", err)
	}
	adv, err := net.ResolveTCPAddr("tcp", advertise(ln.Addr(), host))
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("raft listener: %w", err)
	}
	return &raftStream{ln: ln, creds: creds, adv: adv}, nil
}

func (s *raftStream) Accept() (net.Conn, error) { return s.ln.Accept() }
func (s *raftStream) Close() error              { return s.ln.Close() }
func (s *raftStream) Addr() net.Addr            { return s.adv }

func (s *raftStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return secure.Dial(ctx, string(address), s.creds)
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

// replicaSpec tells an agent to host a root replica, and gives it what a
// successor root needs beyond the replicated state to finish a launch the
// front-end did not: the job's CA (to issue the credentials of the agents
// it starts) and every agent's ranks. It travels only on the job's mutual
// TLS and stays in the agent's memory.
type replicaSpec struct {
	JobDir    string // the job's state directory (shared by the nodes)
	Replicas  int
	CA        []byte  // secure.CA, marshalled
	Placement [][]int // ranks of each agent, by agent index
}

func encodeReplica(e *wire.Encoder, r replicaSpec) {
	e.String(r.JobDir).Uint(uint64(r.Replicas)).Bytes(r.CA).Uint(uint64(len(r.Placement)))
	for _, ranks := range r.Placement {
		e.Uint(uint64(len(ranks)))
		for _, x := range ranks {
			e.Uint(uint64(x))
		}
	}
}

func decodeReplica(d *wire.Decoder) replicaSpec {
	r := replicaSpec{JobDir: d.String(), Replicas: int(d.Uint()), CA: d.Bytes()}
	n := d.Count(1)
	for range n {
		k := d.Count(1)
		ranks := make([]int, 0, k)
		for range k {
			ranks = append(ranks, int(d.Uint()))
		}
		r.Placement = append(r.Placement, ranks)
	}
	return r
}

type replicaUp struct {
	Name, Addr string
}

func (r replicaUp) encode() []byte {
	var e wire.Encoder
	e.String(r.Name).String(r.Addr)
	return e.Data()
}

func decodeReplicaUp(p []byte) (replicaUp, error) {
	d := wire.NewDecoder(p)
	r := replicaUp{Name: d.String(), Addr: d.String()}
	return r, d.Err()
}

// agentReplica is a replica hosted by an agent.
type agentReplica struct {
	r     *raftstore.Replica
	tr    *raft.NetworkTransport
	layer *raftStream
}

// startReplica opens the agent's replica: it waits to be added by the
// leader. ip is the address the agent is reached at.
func (a *Agent) startReplica(ctx context.Context, ip string) (*agentReplica, error) {
	rs := a.spec.Replica
	layer, err := newRaftStream(ctx, a.tree.creds, ip)
	if err != nil {
		return nil, err
	}
	tr := raftstore.NewTCPTransport(layer)
	r, err := raftstore.Open(raftstore.Config{
		StateDir: rs.JobDir, Name: a.spec.Node, Transport: tr,
		Timing: raftstore.DefaultTiming(rs.Replicas),
	})
	if err != nil {
		tr.Close()
		return nil, err
	}
	a.send(mReplicaUp, replicaUp{Name: a.spec.Node, Addr: layer.Addr().String()}.encode())
	ar := &agentReplica{r: r, tr: tr, layer: layer}
	if a.spec.RootChild {
		a.goFunc(func() { a.watchLeadership(ctx, ar) })
	}
	return ar, nil
}

func (ar *agentReplica) close() {
	_ = ar.r.Shutdown()
	_ = ar.tr.Close()
}
