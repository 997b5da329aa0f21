package proto

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The messages an agent sends up to the root, decoded by DecodeUp into one
// typed value each and checked against the job's sizes, so that the
// root's event loop switches on the type and never unmarshals by hand.

// Up is a message an agent sent up, decoded (DecodeUp): one of the types
// below, or Reparent, ChildUp, ReplicaUp, Started, RankStatus, AbortMsg,
// *Contrib, RingAsk.
type Up interface{ isUp() }

// RecAck is an agent's acknowledgement in the restart protocol, or its
// word that a rank opened PMI-1 or the rank protocol (MSuspended to
// MRankProto): Type, and the message.
type RecAck struct {
	Type uint8
	RecMsg
}

// Relayed is a message relayed from agent From (MFrom): its type and
// payload, to be decoded as From's.
type Relayed struct {
	From int
	Type uint8
	P    []byte
}

// ChildReport is a child that could not be started (MChildFailed) or
// whose link ended (MChildGone: Gone).
type ChildReport struct {
	ChildFailed
	Gone bool
}

// BackupUp is the agent's link to its backup parent Backup, up.
type BackupUp struct{ Backup int }

// Output is one rank's complete lines of one stream, frame Seq.
type Output struct {
	Seq          uint64
	Rank, Stream int
	Data         []byte
}

// OutputResync says the agent's output frames from First on follow again.
type OutputResync struct{ First uint64 }

// StdinAck acknowledges one stdin chunk written.
type StdinAck struct{}

// AgentDone is an agent that cleaned up and is about to exit, with its
// node's figures (Stats; StatsOK false when they did not decode: an
// older agent's, said without them).
type AgentDone struct {
	Stats   NodeStats
	StatsOK bool
}

// TableHeld is the node table an agent's ranks hold (a resync's report):
// every rank's value, as patched.
type TableHeld struct{ Values [][]byte }

// RingValues is an agent's answer to a recall of ring values.
type RingValues struct{ *CollResult }

// Bounds are what a message's indexes are checked against: the job's
// ranks and agents.
type Bounds struct{ Ranks, Agents int }

// DecodeUp decodes message typ of agent from (its index), checking the
// indexes it carries against b. A backup parent's index that does not
// decode is ignored, as it always was (nil, nil).
func DecodeUp(from int, typ uint8, p []byte, b Bounds) (Up, error) {
	switch typ {
	case MSuspended, MRespawned, MPatched, MResumed, MRestarted, MPMIInit, MRankProto:
		m, err := DecodeRecMsg(p)
		if err != nil || m.Rank >= b.Ranks {
			return nil, fmt.Errorf("recovery message %d: %v", typ, err)
		}
		return RecAck{Type: typ, RecMsg: m}, nil
	case MFrom:
		src, t, inner, err := Unwrap(p, true)
		if err != nil || src < 0 || src >= b.Agents || src == from || t == MFrom {
			return nil, fmt.Errorf("relayed message from agent %d: %v", src, err)
		}
		return Relayed{From: src, Type: t, P: inner}, nil
	case MReparented:
		rp, err := DecodeReparent(p)
		if err != nil {
			return nil, fmt.Errorf("reparent report: %w", err)
		}
		return rp, nil
	case MChildUp:
		up, err := DecodeChildUp(p)
		if err != nil || up.Idx < 0 || up.Idx >= b.Agents {
			return nil, fmt.Errorf("child up: %v", err)
		}
		return up, nil
	case MChildFailed, MChildGone:
		cf, err := DecodeChildFailed(p)
		if err != nil || cf.Idx < 0 || cf.Idx >= b.Agents {
			return nil, fmt.Errorf("child report: %v", err)
		}
		return ChildReport{ChildFailed: cf, Gone: typ == MChildGone}, nil
	case MBackupUp:
		if x, err := DecodeInt(p); err == nil {
			return BackupUp{Backup: int(x)}, nil
		}
		return nil, nil
	case MReplicaUp:
		ru, err := DecodeReplicaUp(p)
		if err != nil {
			return nil, fmt.Errorf("replica up: %v", err)
		}
		return ru, nil
	case MStarted:
		return up(DecodeStarted(p))
	case MOutput:
		seq, r, stream, data, err := DecodeOutput(p)
		if err != nil || r >= b.Ranks {
			return nil, fmt.Errorf("output message: %v", err)
		}
		return Output{Seq: seq, Rank: r, Stream: stream, Data: data}, nil
	case MOutputResync:
		first, err := DecodeSeq(p)
		if err != nil || first == 0 {
			return nil, fmt.Errorf("output resync: %v", err)
		}
		return OutputResync{First: first}, nil
	case MExit:
		st, err := DecodeRankStatus(p)
		if err != nil {
			return nil, fmt.Errorf("exit message: %w", err)
		}
		if st.Rank >= b.Ranks {
			return nil, fmt.Errorf("exit message for rank %d: no such rank", st.Rank)
		}
		return st, nil
	case MAbort:
		ab, err := DecodeAbort(p)
		if err != nil || ab.Rank >= b.Ranks {
			return nil, fmt.Errorf("abort message: %v", err)
		}
		return ab, nil
	case MTableHeld:
		res, err := DecodeCollResult(p)
		if err != nil || res.Op != rankproto.OpPublish || len(res.Values) != b.Ranks {
			return nil, fmt.Errorf("node table held: %v", err)
		}
		return TableHeld{Values: res.Values}, nil
	case MContrib:
		return up(DecodeContrib(p))
	case MRingAsk:
		return up(DecodeRingAsk(p))
	case MRingValues:
		res, err := DecodeCollResult(p)
		return up(RingValues{res}, err)
	case MStdinAck:
		return StdinAck{}, nil
	case MDone:
		st, err := DecodeNodeStats(p)
		return AgentDone{Stats: st, StatsOK: err == nil}, nil
	}
	return nil, fmt.Errorf("unknown message type %d", typ)
}

// AnyLeader reports whether a root may handle an up message of type typ
// whoever leads its replica group: the ranks' output (the user's session)
// and stdin's credit change no job state, so a deposed front-end need not
// hold them.
func AnyLeader(typ uint8) bool {
	switch typ {
	case MOutput, MOutputResync, MStdinAck:
		return true
	}
	return false
}

// up is a decoder's message as an Up, or its error.
func up[T Up](m T, err error) (Up, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (RecAck) isUp()       {}
func (Relayed) isUp()      {}
func (Reparent) isUp()     {}
func (ChildUp) isUp()      {}
func (ChildReport) isUp()  {}
func (BackupUp) isUp()     {}
func (ReplicaUp) isUp()    {}
func (Started) isUp()      {}
func (Output) isUp()       {}
func (OutputResync) isUp() {}
func (RankStatus) isUp()   {}
func (AbortMsg) isUp()     {}
func (TableHeld) isUp()    {}
func (*Contrib) isUp()     {}
func (RingAsk) isUp()      {}
func (RingValues) isUp()   {}
func (StdinAck) isUp()     {}
func (AgentDone) isUp()    {}
