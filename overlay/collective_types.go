package overlay

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// The collective engine's vocabulary (operations, ids, topology, results,
// errors, configuration, counters) and its internal state; collective.go
// is the engine itself.

// Op names a collective operation.
type Op uint8

// The collective operations of an [Engine].
const (
	// OpGather collects every member's value at the root. The root engine
	// gets one node-level result (Member == NodeMember) holding every
	// value; other nodes get no result.
	OpGather Op = 1 + iota
	// OpBroadcast sends the root's value to every member. Only the root
	// contributes (once, with any member argument); every member of every
	// node gets a result holding the value.
	OpBroadcast
	// OpAllgather gives every member every member's value, ordered by
	// member id.
	OpAllgather
	// OpBarrier releases every member once every member entered.
	OpBarrier
	// OpRing gives every member the values of its left and right
	// neighbours in member-id order, wrapping around (PMIX_Ring), and the
	// number of members.
	OpRing
	// OpFence makes the puts of every node made before the fence visible
	// to Get on every node. Members contribute no data.
	OpFence
)

// String returns the name of the operation.
func (o Op) String() string {
	switch o {
	case OpGather:
		return "gather"
	case OpBroadcast:
		return "broadcast"
	case OpAllgather:
		return "allgather"
	case OpBarrier:
		return "barrier"
	case OpRing:
		return "ring"
	case OpFence:
		return "fence"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

func (o Op) valid() bool { return o >= OpGather && o <= OpFence }

// CollID identifies one collective. The epoch is the job's committed
// recovery epoch; the sequence number orders the collectives of one epoch.
// Every node must use the same CollID for the same collective. Sequence
// numbers are best issued densely from 0 in each epoch: the record of
// finished collectives is compacted below the first gap.
type CollID struct {
	Epoch uint64
	Seq   uint64
}

// String returns "epoch/seq".
func (c CollID) String() string { return fmt.Sprintf("%d/%d", c.Epoch, c.Seq) }

// NoParent is the Topology.Parent of the root.
const NoParent = -1

// NodeMember is the Result.Member of a node-level result (the gather
// result at the root).
const NodeMember = -1

// MaxMember is the largest member id.
const MaxMember = 1<<40 - 1

// Child is one child of a tree node.
type Child struct {
	// ID is the child's node id.
	ID int
	// Members is the number of members hosted in the child's whole
	// subtree. A child whose subtree hosts no member is never waited for
	// and is sent nothing.
	Members int
}

// Topology is a node's view of the tree: plain data, computed by the
// caller from the launch plan.
type Topology struct {
	// Parent is the parent's node id, or NoParent at the root.
	Parent int
	// Children are the node's children.
	Children []Child
	// Members are the ids of the members hosted by this node (its ranks).
	// Member ids are unique in the job and lie in [0, MaxMember].
	Members []int
}

// Entry is one member's value.
type Entry struct {
	Member int
	Data   []byte
}

// Result is the outcome of one collective for one local member (or for the
// node, Member == NodeMember). Data, Entries, Left and Right are shared by
// the results of one node and must not be modified.
type Result struct {
	ID     CollID
	Op     Op
	Member int
	// Err is non-nil when the collective was aborted (ErrAborted, by a
	// newer epoch) or failed locally.
	Err error
	// Data is the broadcast value.
	Data []byte
	// Entries are the values of a gather (at the root) or an allgather,
	// sorted by member id.
	Entries []Entry
	// Left and Right are the ring neighbours; Size is the number of
	// members in the ring.
	Left, Right Entry
	Size        int
}

// Lookup returns the value of member m among r.Entries.
func (r Result) Lookup(m int) ([]byte, bool) {
	i, ok := slices.BinarySearchFunc(r.Entries, m, func(e Entry, m int) int { return cmpInt(e.Member, m) })
	if !ok {
		return nil, false
	}
	return r.Entries[i].Data, true
}

// Errors of an Engine.
var (
	ErrNotMember   = errors.New("not a local member")
	ErrNotRoot     = errors.New("only the root starts a broadcast")
	ErrStaleEpoch  = errors.New("epoch older than the engine's")
	ErrFutureEpoch = errors.New("epoch newer than the engine's")
	ErrFinished    = errors.New("collective already finished")
	ErrDuplicate   = errors.New("duplicate contribution")
	ErrOpMismatch  = errors.New("collective id used with another operation")
	ErrAborted     = errors.New("collective aborted by a newer epoch")
	ErrTooManyOpen = errors.New("too many open collectives")
	ErrProtocol    = errors.New("malformed or unexpected collective message")
	ErrConflict    = errors.New("member contributed by two sources")
	ErrNotFound    = errors.New("key not found")
	ErrNoMembers   = errors.New("no member in this node's subtree")
)

// Config configures an [Engine].
type Config struct {
	// ID is this node's id.
	ID int
	// Topology is this node's place in the tree.
	Topology Topology
	// Transport carries the engine's messages; the engine calls only its
	// Send, except in Run.
	Transport Transport
	// Epoch is the initial epoch.
	Epoch uint64
	// OnResult receives every result. It is called from the goroutine
	// that made the result happen (a caller of Contribute, Handle or
	// SetEpoch), never with an engine lock held, and possibly from
	// several goroutines at once. It must not block for long; it may call
	// the engine's methods. Each member gets at most one result per
	// collective.
	OnResult func(Result)
	// OnError, if set, receives the errors of Handle when Run calls it
	// (from Run's goroutine).
	OnError func(from int, err error)
	// MaxOpen bounds the collectives open at once (default 4096); a
	// message that would open one more is rejected.
	MaxOpen int
	// MaxDeferred bounds the messages of newer epochs kept until
	// SetEpoch reaches their epoch (default 4096); beyond it they are
	// dropped.
	MaxDeferred int
}

// Stats are an engine's counters.
type Stats struct {
	MsgsSent, BytesSent uint64 // messages handed to the transport
	MsgsRecv, BytesRecv uint64 // messages given to Handle
	SendErrors          uint64 // Send calls that failed
	Duplicates          uint64 // contributions or messages ignored as duplicates
	Stale               uint64 // messages of older epochs, dropped
	Deferred            uint64 // messages of newer epochs, kept for later
	Rejected            uint64 // malformed or unexpected messages
}

type counters struct {
	msgsSent, bytesSent, msgsRecv, bytesRecv atomic.Uint64
	sendErrors, duplicates, stale, deferred  atomic.Uint64
	rejected                                 atomic.Uint64
}

// Engine runs the collectives of one tree node. Its methods are safe for
// concurrent use; results are delivered through Config.OnResult.
type Engine struct {
	id          int
	tr          Transport
	onResult    func(Result)
	onError     func(int, error)
	maxOpen     int
	maxDeferred int
	c           counters

	mu       sync.Mutex
	topo     *topo
	epoch    uint64
	colls    map[CollID]*coll
	done     doneSet
	deferred []deferredMsg
	pending  map[string][]byte // puts not yet sent up
	store    []kvSegment       // fenced key/values, oldest first
	seed     maphash.Seed      // hashes the keys of the store
}

type deferredMsg struct {
	from  int
	epoch uint64
	msg   []byte
}

// topo is an immutable, validated Topology.
type topo struct {
	parent       int
	children     []Child
	childIdx     map[int]int
	members      []int // sorted
	memberSet    map[int]struct{}
	waitChildren int // children with members
	subtree      int // members in the whole subtree
}

func newTopo(self int, t Topology) (*topo, error) {
	p := &topo{
		parent:    t.Parent,
		children:  slices.Clone(t.Children),
		childIdx:  make(map[int]int, len(t.Children)),
		members:   slices.Clone(t.Members),
		memberSet: make(map[int]struct{}, len(t.Members)),
	}
	if t.Parent == self || t.Parent < NoParent {
		return nil, fmt.Errorf("topology of node %d: bad parent %d", self, t.Parent)
	}
	for i, c := range t.Children {
		if c.ID == self || c.ID == t.Parent || c.ID < 0 || c.Members < 0 {
			return nil, fmt.Errorf("topology of node %d: bad child %+v", self, c)
		}
		if _, dup := p.childIdx[c.ID]; dup {
			return nil, fmt.Errorf("topology of node %d: child %d listed twice", self, c.ID)
		}
		p.childIdx[c.ID] = i
		if c.Members > 0 {
			p.waitChildren++
			p.subtree += c.Members
		}
	}
	for _, m := range t.Members {
		if m < 0 || m > MaxMember {
			return nil, fmt.Errorf("topology of node %d: member %d out of range", self, m)
		}
		if _, dup := p.memberSet[m]; dup {
			return nil, fmt.Errorf("topology of node %d: member %d listed twice", self, m)
		}
		p.memberSet[m] = struct{}{}
	}
	slices.Sort(p.members)
	p.subtree += len(p.members)
	return p, nil
}

func (t *topo) isRoot() bool { return t.parent == NoParent }

// coll is the state of one open collective at this node.
type coll struct {
	id     CollID
	op     Op
	t      *topo
	local  map[int][]byte // contributions of local members
	ups    []*childUp     // by child index; nil until received
	nUp    int
	sentUp bool // waiting for the parent's answer
	// inflight holds the puts this node sent up with a fence, restored
	// to pending if the fence is aborted.
	inflight map[string][]byte
	ring     *ringState
}

// childUp is one child's decoded contribution.
type childUp struct {
	entries []Entry     // gather, allgather
	ranges  []ringRange // ring
	kv      []byte      // fence
}

// effects collects what a locked section decided to do, done after the
// lock is released.
type effects struct {
	outs    []outMsg
	results []Result
}

type outMsg struct {
	to   int
	data []byte
}
