// Package rankproto defines the ftlaunch rank protocol: the messages a rank
// and its node agent exchange over the socket the rank inherits as
// FTLAUNCH_FD. Frames use the overlay/wire codec.
//
// Requests are strict request/response: a rank sends one request and waits
// for its answer before it sends the next. Put and Get are answered by the
// agent alone; Barrier, Allgather, Publish, Fence and Ring are collectives
// answered once every rank of the job has made the same call, in the same
// order. Abort has no answer: the job is terminated.
//
// The restart protocol adds frames the agent sends on its own, between
// replies: recovery events (suspend, patch, resume), each carrying the
// recovery epoch. A rank acknowledges a suspend (it reached a safe point)
// and a patch (it holds the new node table) with TAck, which has no reply.
// A collective in flight when a recovery begins is answered TRecovering; the
// rank calls it again once resumed. docs/protocol.md describes each message.
package rankproto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// MaxFrame is the largest payload either side accepts on a rank link.
const MaxFrame = 4 << 20

// Message types. Requests go from rank to agent, replies from agent to rank.
const (
	TInit      uint8 = 1  // request: nothing; reply TInitOK
	TBarrier   uint8 = 2  // request: nothing; reply TOK
	TAllgather uint8 = 3  // request: value; reply TValues
	TPublish   uint8 = 4  // request: I-tuple; reply TValues (the node table)
	TPut       uint8 = 5  // request: key, value; reply TOK
	TFence     uint8 = 6  // request: nothing; reply TOK
	TGet       uint8 = 7  // request: key; reply TGetOK
	TRing      uint8 = 8  // request: value; reply TRingOK
	TAbort     uint8 = 9  // request: code, message; no reply
	TAck       uint8 = 10 // rank → agent: acknowledges a recovery event (EncodeAck); no reply

	TInitOK     uint8 = 65 // rank facts
	TOK         uint8 = 66 // empty success
	TValues     uint8 = 67 // one value per rank, by rank
	TGetOK      uint8 = 68 // found flag, value
	TRingOK     uint8 = 69 // left and right neighbour's values
	TError      uint8 = 70 // message: the request failed
	TRecovering uint8 = 71 // epoch: a recovery began; call again once resumed

	TSuspend uint8 = 80 // agent → rank: a recovery began: reach a safe point and acknowledge (EncodeEvent)
	TPatch   uint8 = 81 // agent → rank: node-table rows that changed, with the table's version; acknowledge
	TResume  uint8 = 82 // agent → rank: go on

	TMaxType uint8 = TResume
)

// IsEvent reports whether an agent's frame is a recovery event rather than
// a reply.
func IsEvent(t uint8) bool { return t == TSuspend || t == TPatch || t == TResume }

// Row is one node-table entry a patch replaces.
type Row struct {
	Rank        int
	Incarnation uint64
	ITuple      []byte
}

// Event is a recovery event as the agent sends it.
type Event struct {
	Type    uint8  // TSuspend, TPatch or TResume
	Epoch   uint64 // the recovery epoch
	Version uint64 // the node table's version (patch, resume)
	Rows    []Row  // patch: the rows that changed
}

// EncodeEvent encodes a recovery event's payload.
func EncodeEvent(ev Event) []byte {
	var e wire.Encoder
	e.Uint(ev.Epoch).Uint(ev.Version).Uint(uint64(len(ev.Rows)))
	for _, r := range ev.Rows {
		e.Uint(uint64(r.Rank)).Uint(r.Incarnation).Bytes(r.ITuple)
	}
	return e.Data()
}

// DecodeEvent decodes the payload of a recovery event of type typ.
func DecodeEvent(typ uint8, p []byte) (Event, error) {
	d := wire.NewDecoder(p)
	ev := Event{Type: typ, Epoch: d.Uint(), Version: d.Uint()}
	n := d.Count(3)
	for range n {
		ev.Rows = append(ev.Rows, Row{Rank: int(d.Uint()), Incarnation: d.Uint(), ITuple: d.Bytes()})
	}
	if err := d.Err(); err != nil {
		return Event{}, fmt.Errorf("recovery event: %w", err)
	}
	if !IsEvent(typ) {
		return Event{}, fmt.Errorf("recovery event: type %d is not one", typ)
	}
	return ev, nil
}

// EncodeAck encodes a TAck: the event type and epoch acknowledged.
func EncodeAck(typ uint8, epoch uint64) []byte {
	var e wire.Encoder
	e.Uint(uint64(typ)).Uint(epoch)
	return e.Data()
}

// DecodeAck decodes a TAck.
func DecodeAck(p []byte) (uint8, uint64, error) {
	d := wire.NewDecoder(p)
	t, ep := d.Uint(), d.Uint()
	if err := d.Err(); err != nil {
		return 0, 0, fmt.Errorf("ack: %w", err)
	}
	if t > 255 || !IsEvent(uint8(t)) {
		return 0, 0, fmt.Errorf("ack of type %d", t)
	}
	return uint8(t), ep, nil
}

// Op is the kind of a collective request.
type Op uint8

// The collective operations. Their numeric values are the request types.
const (
	OpBarrier   = Op(TBarrier)
	OpAllgather = Op(TAllgather)
	OpPublish   = Op(TPublish)
	OpFence     = Op(TFence)
	OpRing      = Op(TRing)
)

func (o Op) String() string {
	switch o {
	case OpBarrier:
		return "barrier"
	case OpAllgather:
		return "allgather"
	case OpPublish:
		return "publish"
	case OpFence:
		return "fence"
	case OpRing:
		return "ring"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// IsCollective reports whether a request type is a collective.
func IsCollective(t uint8) bool {
	switch t {
	case TBarrier, TAllgather, TPublish, TFence, TRing:
		return true
	}
	return false
}

// Info is what a rank learns from Init.
type Info struct {
	Rank, Size           int
	LocalRank, LocalSize int
	Node                 string
	NodeID               int
	JobID                string
	Incarnation          uint64 // 1 for the first; grows with every restart of the rank
	Restarts             int    // restarts of the job so far (policy job)
	// Alone: this incarnation was started again alone (--restart rank
	// while no rank had opened the rank protocol: docs/recovery.md); no
	// other rank stopped or went on without it, so it has nothing to
	// roll back to. False for a first start, a respawn of the restart
	// protocol (the others wait, suspended) and a restarted job.
	Alone bool
}

// Encode returns the payload of a TInitOK reply.
func (i Info) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(i.Rank)).Uint(uint64(i.Size)).Uint(uint64(i.LocalRank)).Uint(uint64(i.LocalSize))
	e.String(i.Node).Uint(uint64(i.NodeID)).String(i.JobID)
	e.Uint(i.Incarnation).Uint(uint64(i.Restarts)).Bool(i.Alone)
	return e.Data()
}

// DecodeInfo decodes a TInitOK payload.
func DecodeInfo(p []byte) (Info, error) {
	d := wire.NewDecoder(p)
	i := Info{
		Rank: int(d.Uint()), Size: int(d.Uint()), LocalRank: int(d.Uint()), LocalSize: int(d.Uint()),
		Node: d.String(), NodeID: int(d.Uint()), JobID: d.String(), Incarnation: 1,
	}
	if rest := d.Rest(); d.Err() == nil && len(rest) > 0 {
		// Appended later: an older agent sends no incarnation (1).
		d = wire.NewDecoder(rest)
		i.Incarnation, i.Restarts = d.Uint(), int(d.Uint())
		if d.Len() > 0 { // appended later still
			i.Alone = d.Bool()
		}
	}
	if err := d.Err(); err != nil {
		return Info{}, fmt.Errorf("init reply: %w", err)
	}
	return i, nil
}

// EncodeValues encodes a list of byte strings (TValues, and the contents of
// TAllgather, TPublish and TRing requests as a one-element list).
func EncodeValues(vs [][]byte) []byte {
	var e wire.Encoder
	e.Uint(uint64(len(vs)))
	for _, v := range vs {
		e.Bytes(v)
	}
	return e.Data()
}

// DecodeValues decodes EncodeValues' output.
func DecodeValues(p []byte) ([][]byte, error) {
	d := wire.NewDecoder(p)
	n := d.Count(1)
	vs := make([][]byte, 0, n)
	for range n {
		vs = append(vs, d.Bytes())
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	return vs, nil
}

// EncodeKV encodes a key and a value (TPut request, TGetOK reply with the
// key replaced by a found flag).
func EncodeKV(key string, value []byte) []byte {
	var e wire.Encoder
	e.String(key).Bytes(value)
	return e.Data()
}

// DecodeKV decodes EncodeKV's output.
func DecodeKV(p []byte) (string, []byte, error) {
	d := wire.NewDecoder(p)
	k, v := d.String(), d.Bytes()
	if err := d.Err(); err != nil {
		return "", nil, fmt.Errorf("key/value: %w", err)
	}
	return k, v, nil
}

// EncodeGetOK encodes a TGetOK reply.
func EncodeGetOK(found bool, value []byte) []byte {
	var e wire.Encoder
	e.Bool(found).Bytes(value)
	return e.Data()
}

// DecodeGetOK decodes a TGetOK reply.
func DecodeGetOK(p []byte) (bool, []byte, error) {
	d := wire.NewDecoder(p)
	f, v := d.Bool(), d.Bytes()
	if err := d.Err(); err != nil {
		return false, nil, fmt.Errorf("get reply: %w", err)
	}
	return f, v, nil
}

// EncodeAbort encodes a TAbort request.
func EncodeAbort(code int, msg string) []byte {
	var e wire.Encoder
	e.Int(int64(code)).String(msg)
	return e.Data()
}

// DecodeAbort decodes a TAbort request.
func DecodeAbort(p []byte) (int, string, error) {
	d := wire.NewDecoder(p)
	c, m := d.Int(), d.String()
	if err := d.Err(); err != nil {
		return 0, "", fmt.Errorf("abort: %w", err)
	}
	return int(c), m, nil
}
