package launch

// The agent link's messages about the tree and the root group: a new
// connection's hello, relayed and routed envelopes, children's specs and
// reports, peers' addresses, the replica spec. Both roles use them.

import (
	"errors"
	"fmt"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

func encodePeers(ps []peerAddr) []byte {
	var e wire.Encoder
	e.Uint(uint64(len(ps)))
	for _, p := range ps {
		e.Uint(uint64(p.Idx)).String(p.Name).String(p.Addr)
	}
	return e.Data()
}

func decodePeers(p []byte) ([]peerAddr, error) {
	d := wire.NewDecoder(p)
	n := d.Count(3)
	ps := make([]peerAddr, 0, n)
	for range n {
		ps = append(ps, peerAddr{Idx: int(d.Uint()), Name: d.String(), Addr: d.String()})
	}
	return ps, d.Err()
}

// hello is the first frame on a connection to a parent or backup parent.
type hello struct {
	Idx    int
	Backup bool          // a standby link to a backup parent
	Adopt  bool          // a child of the lost root asks for adoption
	Port   int           // where the caller listens for its own children
	Init   time.Duration // from the caller's process start to this hello
	Inc    uint64        // the caller's incarnation on its node (bootstrap.Inc)
}

func (h hello) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(h.Idx)).Bool(h.Backup).Uint(uint64(h.Port)).Int(int64(h.Init)).Bool(h.Adopt).Uint(h.Inc)
	return e.Data()
}

func decodeHello(p []byte) (hello, error) {
	d := wire.NewDecoder(p)
	h := hello{Idx: int(d.Uint()), Backup: d.Bool(), Port: int(d.Uint()), Init: time.Duration(d.Int()), Adopt: d.Bool(), Inc: d.Uint()}
	if err := d.Err(); err != nil {
		return h, fmt.Errorf("hello: %w", err)
	}
	return h, nil
}

// envelope is a relayed or routed frame: mFrom and mRoute carry a node
// index, mBcast none.
func wrap(node int, typ uint8, p []byte) []byte {
	var e wire.Encoder
	if node >= 0 {
		e.Uint(uint64(node))
	}
	b := append(e.Data(), typ)
	return append(b, p...)
}

func unwrap(p []byte, hasNode bool) (node int, typ uint8, inner []byte, err error) {
	d := wire.NewDecoder(p)
	node = -1
	if hasNode {
		node = int(d.Uint())
	}
	rest := d.Rest()
	if d.Err() != nil || len(rest) == 0 {
		return 0, 0, nil, errors.New("truncated envelope")
	}
	return node, rest[0], rest[1:], nil
}

// childSpec is a child an agent launches: its index, host name (also the
// name in its certificate), credentials, and the agents below it (for
// routing).
type childSpec struct {
	Idx   int
	Name  string
	Creds []byte
	Sub   []int
	Inc   uint64 // its incarnation (bootstrap.Inc); not sent in a parent's spec
}

// launchSpec tells an agent how to start its children.
type launchSpec struct {
	Mode         string // "ssh" or "local"
	AgentPath    string
	SSHConfig    string
	AcceptNew    bool
	ForwardAgent bool
	Batch        int // start leaf children in batches of this size (0: all at once)
}

func encodeTree(e *wire.Encoder, l launchSpec, cs []childSpec) {
	e.String(l.Mode).String(l.AgentPath).String(l.SSHConfig).Bool(l.AcceptNew).Bool(l.ForwardAgent).Uint(uint64(l.Batch))
	e.Uint(uint64(len(cs)))
	for _, c := range cs {
		e.Uint(uint64(c.Idx)).String(c.Name).Bytes(c.Creds).Uint(uint64(len(c.Sub)))
		for _, s := range c.Sub {
			e.Uint(uint64(s))
		}
	}
}

func decodeTree(d *wire.Decoder) (launchSpec, []childSpec) {
	l := launchSpec{Mode: d.String(), AgentPath: d.String(), SSHConfig: d.String(), AcceptNew: d.Bool(), ForwardAgent: d.Bool(), Batch: int(d.Uint())}
	n := d.Count(4)
	var cs []childSpec
	for range n {
		c := childSpec{Idx: int(d.Uint()), Name: d.String(), Creds: d.Bytes()}
		m := d.Count(1)
		for range m {
			c.Sub = append(c.Sub, int(d.Uint()))
		}
		cs = append(cs, c)
	}
	return l, cs
}

// childUp reports a child that connected back: where it listens and how
// its start went, measured by its parent.
type childUp struct {
	Idx      int
	Addr     string        // host:port of the child's listener
	SSH      time.Duration // the spawner's start (SSH session up)
	Queued   time.Duration // of SSH, waiting for a slot
	Attempts int
	Up       time.Duration // connected, since the parent began launching
	Init     time.Duration // the child's own start-up until its hello
}

func (c childUp) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(c.Idx)).String(c.Addr).Int(int64(c.SSH)).Int(int64(c.Queued)).Uint(uint64(c.Attempts))
	e.Int(int64(c.Up)).Int(int64(c.Init))
	return e.Data()
}

func decodeChildUp(p []byte) (childUp, error) {
	d := wire.NewDecoder(p)
	c := childUp{Idx: int(d.Uint()), Addr: d.String(), SSH: time.Duration(d.Int()), Queued: time.Duration(d.Int()), Attempts: int(d.Uint())}
	c.Up, c.Init = time.Duration(d.Int()), time.Duration(d.Int())
	if err := d.Err(); err != nil {
		return c, fmt.Errorf("child up: %w", err)
	}
	return c, nil
}

// childFailed reports a child that could not be started, or whose link
// ended.
type childFailed struct {
	Idx int
	Msg string
}

func (c childFailed) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(c.Idx)).String(c.Msg)
	return e.Data()
}

func decodeChildFailed(p []byte) (childFailed, error) {
	d := wire.NewDecoder(p)
	c := childFailed{Idx: int(d.Uint()), Msg: d.String()}
	return c, d.Err()
}

// peerAddr names an agent and where it listens.
type peerAddr struct {
	Idx  int
	Name string
	Addr string
}

func (a peerAddr) encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(a.Idx)).String(a.Name).String(a.Addr)
	return e.Data()
}

func decodePeerAddr(p []byte) (peerAddr, error) {
	d := wire.NewDecoder(p)
	a := peerAddr{Idx: int(d.Uint()), Name: d.String(), Addr: d.String()}
	return a, d.Err()
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
