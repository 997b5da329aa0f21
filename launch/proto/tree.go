package proto

// The agent link's messages about the tree and the root group: a new
// connection's hello, relayed and routed envelopes, children's specs and
// reports, peers' addresses, the replica spec. Both roles use them.

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Replicas are the replica agents of a replicated root (MReplicas), and
// whether the front-end still has a vote in their group (a successor that
// put a replica in its place removed it).
type Replicas struct {
	Peers         []PeerAddr
	FrontEndVotes bool
}

func (r Replicas) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(len(r.Peers)))
	for _, p := range r.Peers {
		e.Uint(uint64(p.Idx)).String(p.Name).String(p.Addr)
	}
	e.Bool(r.FrontEndVotes)
	return e.Data()
}

func DecodeReplicas(p []byte) (Replicas, error) {
	d := wire.NewDecoder(p)
	n := d.Count(3)
	r := Replicas{Peers: make([]PeerAddr, 0, n)}
	for range n {
		r.Peers = append(r.Peers, PeerAddr{Idx: int(d.Uint()), Name: d.String(), Addr: d.String()})
	}
	r.FrontEndVotes = d.Bool()
	return r, d.Err()
}

// Refresh takes ps as the replica agents once the first list was sent
// (Peers not nil) and reports whether it differs: the root's children are
// told again.
func (r *Replicas) Refresh(ps []PeerAddr) bool {
	if r.Peers == nil || slices.Equal(ps, r.Peers) {
		return false
	}
	r.Peers = ps
	return true
}

// EncodePeers encodes a list of agents' (or the root's: index -1)
// addresses.
func EncodePeers(ps []PeerAddr) []byte {
	var e wire.Encoder
	e.Uint(uint64(len(ps)))
	for _, p := range ps {
		e.Int(int64(p.Idx)).String(p.Name).String(p.Addr)
	}
	return e.Data()
}

func DecodePeers(p []byte) ([]PeerAddr, error) {
	d := wire.NewDecoder(p)
	n := d.Count(3)
	ps := make([]PeerAddr, 0, n)
	for range n {
		ps = append(ps, PeerAddr{Idx: int(d.Int()), Name: d.String(), Addr: d.String()})
	}
	return ps, d.Err()
}

// EncodeStrings encodes a list of names (MShutdown: the replicas that
// wait for the final status).
func EncodeStrings(ss []string) []byte {
	if len(ss) == 0 {
		return nil
	}
	var e wire.Encoder
	e.Uint(uint64(len(ss)))
	for _, s := range ss {
		e.String(s)
	}
	return e.Data()
}

// DecodeStrings decodes EncodeStrings's list (nil or empty: none).
func DecodeStrings(p []byte) ([]string, error) {
	if len(p) == 0 {
		return nil, nil
	}
	d := wire.NewDecoder(p)
	n := d.Count(1)
	ss := make([]string, 0, n)
	for range n {
		ss = append(ss, d.String())
	}
	return ss, d.Err()
}

// Hello is the first frame on a connection to a parent or backup parent.
type Hello struct {
	Idx    int
	Backup bool          // a standby link to a backup parent
	Adopt  bool          // a child of the lost root asks for adoption
	Port   int           // where the caller listens for its own children
	Init   time.Duration // from the caller's process start to this hello
	Inc    uint64        // the caller's incarnation on its node (bootstrap.Inc)
	// Control: `ftlaunch cancel` or `kill` asks the root to end or signal
	// the job (a Control frame follows; launch/jobctl).
	Control bool
}

func (h Hello) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(h.Idx)).Bool(h.Backup).Uint(uint64(h.Port)).Int(int64(h.Init)).Bool(h.Adopt).Uint(h.Inc).Bool(h.Control)
	return e.Data()
}

func DecodeHello(p []byte) (Hello, error) {
	d := wire.NewDecoder(p)
	h := Hello{Idx: int(d.Uint()), Backup: d.Bool(), Port: int(d.Uint()), Init: time.Duration(d.Int()), Adopt: d.Bool(), Inc: d.Uint(), Control: d.Bool()}
	if err := d.Err(); err != nil {
		return h, fmt.Errorf("hello: %w", err)
	}
	return h, nil
}

// envelope is a relayed or routed frame: mFrom and mRoute carry a node
// index, mBcast none.
func Wrap(node int, typ uint8, p []byte) []byte {
	var e wire.Encoder
	if node >= 0 {
		e.Uint(uint64(node))
	}
	b := append(e.Data(), typ)
	return append(b, p...)
}

func Unwrap(p []byte, hasNode bool) (node int, typ uint8, inner []byte, err error) {
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

// ChildSpec is a child an agent launches: its index, host name (also the
// name in its certificate), credentials, and the agents below it (for
// routing).
type ChildSpec struct {
	Idx   int
	Name  string
	Creds []byte
	Sub   []int
	Inc   uint64 // its incarnation (bootstrap.Inc); not sent in a parent's spec
}

// LaunchSpec tells an agent how to start its children.
type LaunchSpec struct {
	Mode         string // "ssh" or "local"
	AgentPath    string
	SSHConfig    string
	AcceptNew    bool
	ForwardAgent bool
	Batch        int // start leaf children in batches of this size (0: all at once)
}

func encodeTree(e *wire.Encoder, l LaunchSpec, cs []ChildSpec) {
	e.String(l.Mode).String(l.AgentPath).String(l.SSHConfig).Bool(l.AcceptNew).Bool(l.ForwardAgent).Uint(uint64(l.Batch))
	e.Uint(uint64(len(cs)))
	for _, c := range cs {
		e.Uint(uint64(c.Idx)).String(c.Name).Bytes(c.Creds).Uint(uint64(len(c.Sub)))
		for _, s := range c.Sub {
			e.Uint(uint64(s))
		}
	}
}

func decodeTree(d *wire.Decoder) (LaunchSpec, []ChildSpec) {
	l := LaunchSpec{Mode: d.String(), AgentPath: d.String(), SSHConfig: d.String(), AcceptNew: d.Bool(), ForwardAgent: d.Bool(), Batch: int(d.Uint())}
	n := d.Count(4)
	var cs []ChildSpec
	for range n {
		c := ChildSpec{Idx: int(d.Uint()), Name: d.String(), Creds: d.Bytes()}
		m := d.Count(1)
		for range m {
			c.Sub = append(c.Sub, int(d.Uint()))
		}
		cs = append(cs, c)
	}
	return l, cs
}

// ChildUp reports a child that connected back: where it listens and how
// its start went, measured by its parent.
type ChildUp struct {
	Idx      int
	Addr     string        // host:port of the child's listener
	SSH      time.Duration // the spawner's start (SSH session up)
	Queued   time.Duration // of SSH, waiting for a slot
	Attempts int
	Up       time.Duration // connected, since the parent began launching
	Init     time.Duration // the child's own start-up until its hello
}

func (c ChildUp) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(c.Idx)).String(c.Addr).Int(int64(c.SSH)).Int(int64(c.Queued)).Uint(uint64(c.Attempts))
	e.Int(int64(c.Up)).Int(int64(c.Init))
	return e.Data()
}

func DecodeChildUp(p []byte) (ChildUp, error) {
	d := wire.NewDecoder(p)
	c := ChildUp{Idx: int(d.Uint()), Addr: d.String(), SSH: time.Duration(d.Int()), Queued: time.Duration(d.Int()), Attempts: int(d.Uint())}
	c.Up, c.Init = time.Duration(d.Int()), time.Duration(d.Int())
	if err := d.Err(); err != nil {
		return c, fmt.Errorf("child up: %w", err)
	}
	return c, nil
}

// ChildFailed reports a child that could not be started, or whose link
// ended.
type ChildFailed struct {
	Idx int
	Msg string
	// Silent: the child's link fell silent (its heartbeat timed out): its
	// node may be down, hung or cut off (MChildGone).
	Silent bool
}

func (c ChildFailed) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(c.Idx)).String(c.Msg).Bool(c.Silent)
	return e.Data()
}

func DecodeChildFailed(p []byte) (ChildFailed, error) {
	d := wire.NewDecoder(p)
	c := ChildFailed{Idx: int(d.Uint()), Msg: d.String(), Silent: d.Bool()}
	return c, d.Err()
}

// Err is the child's loss as an error: one that is ErrHeartbeat when the
// link fell silent.
func (c ChildFailed) Err() error {
	if c.Silent {
		return silentErr(c.Msg)
	}
	return errors.New(c.Msg)
}

// silentErr is a child's link that fell silent, as its parent said it.
type silentErr string

func (e silentErr) Error() string { return string(e) }
func (e silentErr) Unwrap() error { return ErrHeartbeat }

// PeerAddr names an agent and where it listens.
type PeerAddr struct {
	Idx  int
	Name string
	Addr string
}

func (a PeerAddr) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(a.Idx)).String(a.Name).String(a.Addr)
	return e.Data()
}

func DecodePeerAddr(p []byte) (PeerAddr, error) {
	d := wire.NewDecoder(p)
	a := PeerAddr{Idx: int(d.Uint()), Name: d.String(), Addr: d.String()}
	return a, d.Err()
}

// ReplicaSpec tells an agent to host a root replica, and gives it what a
// successor root needs beyond the replicated state to finish a launch the
// front-end did not: the job's CA (to issue the credentials of the agents
// it starts) and every agent's ranks. It travels only on the job's mutual
// TLS and stays in the agent's memory.
type ReplicaSpec struct {
	JobDir    string // the job's state directory (shared by the nodes)
	Replicas  int
	CA        []byte  // secure.CA, marshalled
	Placement [][]int // ranks of each agent, by agent index
}

func encodeReplica(e *wire.Encoder, r ReplicaSpec) {
	e.String(r.JobDir).Uint(uint64(r.Replicas)).Bytes(r.CA).Uint(uint64(len(r.Placement)))
	for _, ranks := range r.Placement {
		e.Uint(uint64(len(ranks)))
		for _, x := range ranks {
			e.Uint(uint64(x))
		}
	}
}

func decodeReplica(d *wire.Decoder) ReplicaSpec {
	r := ReplicaSpec{JobDir: d.String(), Replicas: int(d.Uint()), CA: d.Bytes()}
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

type ReplicaUp struct {
	Name, Addr string
}

func (r ReplicaUp) Encode() []byte {
	var e wire.Encoder
	e.String(r.Name).String(r.Addr)
	return e.Data()
}

func DecodeReplicaUp(p []byte) (ReplicaUp, error) {
	d := wire.NewDecoder(p)
	r := ReplicaUp{Name: d.String(), Addr: d.String()}
	return r, d.Err()
}

// Reparent is a child of a lost parent moving to its backup parent: the
// child's index, incarnation and the agents below it (MAdoptMe), as the
// backup parent reports it up (MReparented).
type Reparent struct {
	Idx int
	Inc uint64
	Sub []int
}

func (r Reparent) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(r.Idx)).Uint(r.Inc).Uint(uint64(len(r.Sub)))
	for _, s := range r.Sub {
		e.Uint(uint64(s))
	}
	return e.Data()
}

func DecodeReparent(p []byte) (Reparent, error) {
	d := wire.NewDecoder(p)
	r := Reparent{Idx: int(d.Uint()), Inc: d.Uint()}
	n := d.Uint()
	if n > uint64(len(p)) {
		return r, fmt.Errorf("reparent: %d agents in %d bytes", n, len(p))
	}
	for range n {
		r.Sub = append(r.Sub, int(d.Uint()))
	}
	return r, d.Err()
}

// Routes tells an agent that Agents are now reached through its child Via
// (after a reparent below it).
type Routes struct {
	Via    int
	Agents []int
}

func (r Routes) Encode() []byte {
	return Reparent{Idx: r.Via, Sub: r.Agents}.Encode()
}

func DecodeRoutes(p []byte) (Routes, error) {
	r, err := DecodeReparent(p)
	return Routes{Via: r.Idx, Agents: r.Sub}, err
}

// EncodeReplicaSpec is a replica spec on its own (MHostReplica).
func EncodeReplicaSpec(r ReplicaSpec) []byte {
	var e wire.Encoder
	encodeReplica(&e, r)
	return e.Data()
}

func DecodeReplicaSpec(p []byte) (ReplicaSpec, error) {
	d := wire.NewDecoder(p)
	r := decodeReplica(d)
	return r, d.Err()
}
