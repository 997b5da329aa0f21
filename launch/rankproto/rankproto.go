// Package rankproto defines the ftlaunch rank protocol: the messages a rank
// and its node agent exchange over the socket the rank inherits as
// FTLAUNCH_FD. Frames use the overlay/wire codec.
//
// The protocol is strict request/response: a rank sends one request and
// waits for its answer before it sends the next. Put and Get are answered by
// the agent alone; Barrier, Allgather, Publish, Fence and Ring are
// collectives answered once every rank of the job has made the same call,
// in the same order. Abort has no answer: the job is terminated.
// docs/protocol.md describes each message.
package rankproto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// MaxFrame is the largest payload either side accepts on a rank link.
const MaxFrame = 4 << 20

// Message types. Requests go from rank to agent, replies from agent to rank.
const (
	TInit      uint8 = 1 // request: nothing; reply TInitOK
	TBarrier   uint8 = 2 // request: nothing; reply TOK
	TAllgather uint8 = 3 // request: value; reply TValues
	TPublish   uint8 = 4 // request: I-tuple; reply TValues (the node table)
	TPut       uint8 = 5 // request: key, value; reply TOK
	TFence     uint8 = 6 // request: nothing; reply TOK
	TGet       uint8 = 7 // request: key; reply TGetOK
	TRing      uint8 = 8 // request: value; reply TRingOK
	TAbort     uint8 = 9 // request: code, message; no reply

	TInitOK  uint8 = 65 // rank facts
	TOK      uint8 = 66 // empty success
	TValues  uint8 = 67 // one value per rank, by rank
	TGetOK   uint8 = 68 // found flag, value
	TRingOK  uint8 = 69 // left and right neighbour's values
	TError   uint8 = 70 // message: the request failed
	TMaxType uint8 = TError
)

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
}

// Encode returns the payload of a TInitOK reply.
func (i Info) Encode() []byte {
	var e wire.Encoder
	e.Uint(uint64(i.Rank)).Uint(uint64(i.Size)).Uint(uint64(i.LocalRank)).Uint(uint64(i.LocalSize))
	e.String(i.Node).Uint(uint64(i.NodeID)).String(i.JobID)
	return e.Data()
}

// DecodeInfo decodes a TInitOK payload.
func DecodeInfo(p []byte) (Info, error) {
	d := wire.NewDecoder(p)
	i := Info{
		Rank: int(d.Uint()), Size: int(d.Uint()), LocalRank: int(d.Uint()), LocalSize: int(d.Uint()),
		Node: d.String(), NodeID: int(d.Uint()), JobID: d.String(),
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
