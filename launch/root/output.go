package root

import "github.com/ftlaunch/ftlaunch/launch/proto"

// The root's side of the numbered output frames (proto/launch/proto/outq.go): which it
// writes, and the acknowledgements of what the writer wrote.

// takeOutput decides whether the root writes an output frame of agent a:
// only the one it expects next (outNext; 0 before a new root learns it).
func (a *agentHandle) takeOutput(seq uint64) bool {
	if a.outNext == 0 || seq != a.outNext {
		return false
	}
	a.outNext++
	return true
}

// outputResync takes an agent's word on where its resent output begins.
func (a *agentHandle) outputResync(first uint64) {
	if a.outNext == 0 || first > a.outNext {
		a.outNext = first
	}
}

// AckOutput acknowledges the agent's output frames up to seq: the output
// writer wrote them.
func (a *agentHandle) AckOutput(seq uint64) {
	_ = a.send(proto.MOutputAck, proto.EncodeInt(int64(seq)))
}
