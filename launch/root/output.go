package root

import "github.com/ftlaunch/ftlaunch/launch/proto"

// AckOutput acknowledges the agent's output frames up to seq: the output
// writer wrote them (output.Source).
func (a *agentHandle) AckOutput(seq uint64) {
	_ = a.send(proto.MOutputAck, proto.EncodeInt(int64(seq)))
}
