package launcher

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// Command is the message that carries one of the planner's restart
// protocol commands (Suspend, Respawn, Patch, Resume, RestartJob) to the
// agents: its type and payload. It panics on any other action.
func Command(act recovery.Action) (uint8, []byte) {
	switch act := act.(type) {
	case recovery.Suspend:
		return proto.MSuspend, proto.RecMsg{Epoch: act.Epoch}.Encode()
	case recovery.Respawn:
		return proto.MRespawn, proto.RecMsg{Epoch: act.Epoch, Rank: act.Rank, Incarnation: act.Incarnation}.Encode()
	case recovery.Patch:
		m := proto.RecMsg{Epoch: act.Epoch, Version: act.Version}
		for _, row := range act.Rows {
			m.Rows = append(m.Rows, proto.RecRow{Rank: row.Rank, Incarnation: row.Incarnation, Addr: row.Addr})
		}
		return proto.MPatch, m.Encode()
	case recovery.Resume:
		return proto.MResume, proto.RecMsg{Epoch: act.Epoch, Version: act.Version}.Encode()
	case recovery.RestartJob:
		return proto.MRestartJob, proto.RecMsg{Epoch: act.Epoch, Restarts: act.Restarts}.Encode()
	}
	panic(fmt.Sprintf("launcher: %T is not a restart protocol command", act))
}

// AckEvent is the planner's event for an acknowledgement of the restart
// protocol from agent (on node), as proto.DecodeUp read it; nil for a type
// that is not one.
func AckEvent(agent int, node string, m proto.RecAck) recovery.Event {
	switch m.Type {
	case proto.MSuspended:
		return recovery.Suspended{Agent: agent, Epoch: m.Epoch}
	case proto.MRespawned:
		return recovery.Respawned{Rank: m.Rank, Incarnation: m.Incarnation, Addr: m.Addr}
	case proto.MPatched:
		return recovery.Patched{Agent: agent, Epoch: m.Epoch, Version: m.Version}
	case proto.MResumed:
		return recovery.Resumed{Agent: agent, Epoch: m.Epoch}
	case proto.MRestarted:
		return recovery.Restarted{Agent: agent, Epoch: m.Epoch}
	case proto.MPMIInit:
		return recovery.PMIInit{Rank: m.Rank, Node: node}
	case proto.MRankProto:
		return recovery.ProtocolOpened{Rank: m.Rank, Node: node}
	}
	return nil
}
