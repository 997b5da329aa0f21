package launcher

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestCommand: each restart protocol command goes to the agents as its
// message type with the fields the agent reads.
func TestCommand(t *testing.T) {
	for _, c := range []struct {
		act  recovery.Action
		typ  uint8
		want proto.RecMsg
	}{
		{recovery.Suspend{Epoch: 3}, proto.MSuspend, proto.RecMsg{Epoch: 3}},
		{recovery.Respawn{Epoch: 3, Rank: 5, Agent: 2, Incarnation: 4}, proto.MRespawn, proto.RecMsg{Epoch: 3, Rank: 5, Incarnation: 4}},
		{recovery.Patch{Epoch: 3, Version: 7, Rows: []recovery.RankRecord{{Rank: 5, Incarnation: 4, Addr: []byte("a5")}}}, proto.MPatch,
			proto.RecMsg{Epoch: 3, Version: 7, Rows: []proto.RecRow{{Rank: 5, Incarnation: 4, Addr: []byte("a5")}}}},
		{recovery.Patch{Epoch: 3, Version: 7}, proto.MPatch, proto.RecMsg{Epoch: 3, Version: 7}},
		{recovery.Resume{Epoch: 3, Version: 7}, proto.MResume, proto.RecMsg{Epoch: 3, Version: 7}},
		{recovery.RestartJob{Epoch: 3, Restarts: 2, Deferred: true}, proto.MRestartJob, proto.RecMsg{Epoch: 3, Restarts: 2}},
	} {
		typ, p := Command(c.act)
		if got, err := proto.DecodeRecMsg(p); err != nil || typ != c.typ || !bytes.Equal(p, c.want.Encode()) {
			t.Errorf("%#v: type %d, %+v, %v; want type %d, %+v", c.act, typ, got, err, c.typ, c.want)
		}
	}
}

// TestAckEvent: each acknowledgement of the restart protocol is the
// planner's event, naming the agent it came from (or the node, for what a
// rank did); any other message is none.
func TestAckEvent(t *testing.T) {
	m := proto.RecMsg{Epoch: 3, Version: 7, Rank: 5, Incarnation: 4, Addr: []byte("a5")}
	for _, c := range []struct {
		typ  uint8
		want recovery.Event
	}{
		{proto.MSuspended, recovery.Suspended{Agent: 2, Epoch: 3}},
		{proto.MRespawned, recovery.Respawned{Rank: 5, Incarnation: 4, Addr: []byte("a5")}},
		{proto.MPatched, recovery.Patched{Agent: 2, Epoch: 3, Version: 7}},
		{proto.MResumed, recovery.Resumed{Agent: 2, Epoch: 3}},
		{proto.MRestarted, recovery.Restarted{Agent: 2, Epoch: 3}},
		{proto.MPMIInit, recovery.PMIInit{Rank: 5, Node: "n2"}},
		{proto.MRankProto, recovery.ProtocolOpened{Rank: 5, Node: "n2"}},
		{proto.MSuspend, nil},
	} {
		if got := AckEvent(2, "n2", proto.RecAck{Type: c.typ, RecMsg: m}); !reflect.DeepEqual(got, c.want) {
			t.Errorf("type %d: %#v, want %#v", c.typ, got, c.want)
		}
	}
}
