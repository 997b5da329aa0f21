package proto

import (
	"reflect"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// TestDecodeUpChecksIndexes: each message an agent sends up decodes into
// its type, and one whose rank or agent is out of the job's bounds is a
// protocol error, in the words the root has always told.
func TestDecodeUpChecksIndexes(t *testing.T) {
	b := Bounds{Ranks: 4, Agents: 3}
	table := &CollResult{Op: rankproto.OpPublish, Values: make([][]byte, 4)}
	for _, tc := range []struct {
		name string
		from int
		typ  uint8
		p    []byte
		want Up
		err  string
	}{
		{"respawned of no rank", 1, MRespawned, RecMsg{Rank: 4}.Encode(), nil, "recovery message 49: <nil>"},
		{"relayed", 0, MFrom, Wrap(2, MStdinAck, nil), Relayed{From: 2, Type: MStdinAck, P: []byte{}}, ""},
		{"relayed from itself", 2, MFrom, Wrap(2, MStdinAck, nil), nil, "relayed message from agent 2: <nil>"},
		{"relayed relay", 0, MFrom, Wrap(1, MFrom, nil), nil, "relayed message from agent 1: <nil>"},
		{"child up of no agent", 0, MChildUp, ChildUp{Idx: 3}.Encode(), nil, "child up: <nil>"},
		{"child gone", 0, MChildGone, ChildFailed{Idx: 1, Msg: "x"}.Encode(), ChildReport{ChildFailed: ChildFailed{Idx: 1, Msg: "x"}, Gone: true}, ""},
		{"child failed of no agent", 0, MChildFailed, ChildFailed{Idx: 5}.Encode(), nil, "child report: <nil>"},
		{"backup up", 1, MBackupUp, EncodeInt(2), BackupUp{Backup: 2}, ""},
		{"backup up undecoded: ignored", 1, MBackupUp, nil, nil, ""},
		{"output of no rank", 0, MOutput, encodeOutput(1, 4, StreamStdout, nil), nil, "output message: <nil>"},
		{"output", 0, MOutput, encodeOutput(1, 3, StreamStderr, []byte("x")), Output{Seq: 1, Rank: 3, Stream: StreamStderr, Data: []byte("x")}, ""},
		{"output resync from 0", 0, MOutputResync, EncodeInt(0), nil, "output resync: <nil>"},
		{"exit of no rank", 0, MExit, RankStatus{Rank: 4}.Encode(), nil, "exit message for rank 4: no such rank"},
		{"abort of no rank", 0, MAbort, AbortMsg{Rank: 9}.Encode(), nil, "abort message: <nil>"},
		{"table held", 0, MTableHeld, table.Encode(), TableHeld{Values: [][]byte{{}, {}, {}, {}}}, ""},
		{"table held short", 0, MTableHeld, (&CollResult{Op: rankproto.OpPublish, Values: make([][]byte, 3)}).Encode(), nil, "node table held: <nil>"},
		{"done without figures", 0, MDone, nil, AgentDone{}, ""},
		{"done", 0, MDone, NodeStats{PMIUp: 5}.Encode(), AgentDone{Stats: NodeStats{PMIUp: 5}, StatsOK: true}, ""},
		{"unknown", 0, 99, nil, nil, "unknown message type 99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeUp(tc.from, tc.typ, tc.p, b)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// TestDecodeUpRecAck: the restart protocol's acknowledgements decode with
// their type.
func TestDecodeUpRecAck(t *testing.T) {
	got, err := DecodeUp(1, MPatched, RecMsg{Epoch: 3, Version: 2}.Encode(), Bounds{Ranks: 4, Agents: 2})
	if ack, ok := got.(RecAck); err != nil || !ok || ack.Type != MPatched || ack.Epoch != 3 || ack.Version != 2 {
		t.Errorf("decoded %#v, %v", got, err)
	}
}

// TestNodeStatsWords: a node's figures as --verbose says them.
func TestNodeStatsWords(t *testing.T) {
	n := NodeStats{PMIUp: 300, Barrier: 2}
	n.PMI.Requests, n.PMI.Puts, n.PMI.Gets, n.PMI.Barriers, n.PMI.BytesIn, n.PMI.BytesOut = 9, 4, 3, 2, 100, 200
	if w := n.Words(); w != "PMI 9 requests (4 puts, 3 gets, 2 barriers) answered on the node, 100 B in / 200 B out; 300 B sent up in 2 barrier(s)" {
		t.Errorf("words %q", w)
	}
}
