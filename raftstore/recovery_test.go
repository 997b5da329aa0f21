package raftstore

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func sampleRecovery(epoch uint64, stage string) Recovery {
	return Recovery{Epoch: epoch, Stage: stage, Version: 4, Restarts: 1, Alone: true,
		Ranks: []RecoveryRank{{Rank: 3, Agent: 1, Incarnation: 2, Addr: []byte("it3"), Restarts: 1}, {Rank: 5, Agent: 1, Incarnation: 1, Failed: true}},
		Agents: []RecoveryAgent{{Agent: 1, Node: "n1", Incarnation: 2, Restarts: 1, Up: true,
			Unfenced: []FenceRecord{{Node: "n1", Incarnation: 1}}, Fenced: []FenceRecord{{Node: "n9", Incarnation: 1, How: "self-fenced"}}}},
	}
}

// TestFSMSetRecovery: the typed recovery record is kept whole, survives a
// snapshot and a command round trip; the state has one epoch, which a
// record moves forward and never back, and a record older than the
// recorded one is refused.
func TestFSMSetRecovery(t *testing.T) {
	h := newHarness(t)
	h.refused(&SetRecovery{Recovery: sampleRecovery(1, "suspend")}, ErrRefused) // before the job
	h.launch(8)
	if r := h.ok(&SetRecovery{Recovery: sampleRecovery(2, "suspend"), Events: []Event{ev(EventRecovery, "n0", 3, 1, "suspend")}}); r.Epoch != 2 {
		t.Fatalf("epoch after the first record %d, want 2", r.Epoch)
	}
	h.ok(&BumpEpoch{ExpectEpoch: 2, Leader: "n1"}) // a takeover: epoch 3
	want := sampleRecovery(2, "respawn")
	// The recovery's commands still carry epoch 2: the state's stays 3.
	if r := h.ok(&SetRecovery{ExpectEpoch: 3, Recovery: want}); r.Epoch != 3 {
		t.Fatalf("epoch %d after a record of an epoch below the state's, want 3", r.Epoch)
	}
	h.refused(&SetRecovery{ExpectEpoch: 3, Recovery: sampleRecovery(1, "patch")}, ErrRefused)                           // older than the recorded
	h.refused(&SetRecovery{ExpectEpoch: 3, Recovery: Recovery{Epoch: 4, Ranks: []RecoveryRank{{Rank: 8}}}}, ErrRefused) // no rank 8
	g := snapshotRoundTrip(t, h.f)
	for _, f := range []*FSM{h.f, g} {
		f.View(func(s *State) {
			if s.Epoch != 3 || !reflect.DeepEqual(s.Recovery, &want) {
				t.Fatalf("recovery %+v at epoch %d, want %+v at epoch 3", s.Recovery, s.Epoch, want)
			}
		})
		if err := f.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if g.Digest() != h.f.Digest() {
		t.Fatal("the restored state's digest differs")
	}
	in := &SetRecovery{ExpectEpoch: 6, Recovery: sampleRecovery(7, "patch")}
	in.Recovery.Ranks[0].Addr = []byte{} // an empty address is not none
	c, err := Decode(Encode(in))
	if err != nil || !reflect.DeepEqual(c, in) {
		t.Fatalf("decode: %#v, %v; want %#v", c, err, in)
	}
	cp := h.f.Copy()
	cp.Recovery.Ranks[0].Addr[0] = 'X'
	h.f.View(func(s *State) {
		if s.Recovery.Ranks[0].Addr[0] == 'X' {
			t.Fatal("a copy's recovery record shares its addresses with the state")
		}
	})
}

// TestFSMStaleRootRefused: a root that did not see a takeover (BumpEpoch)
// cannot record a recovery nor change the tree: the FSM compares the
// epoch its writer states with its own and refuses, changing nothing;
// the successor, which states the epoch after the takeover, is applied.
func TestFSMStaleRootRefused(t *testing.T) {
	h := newHarness(t)
	h.launch(8)
	h.ok(&SetRecovery{ExpectEpoch: 0, Recovery: sampleRecovery(1, "suspend")})
	h.ok(&BumpEpoch{ExpectEpoch: 1, Leader: "n1", Reason: "the front-end was lost"})
	// The deposed front-end, which last saw epoch 1, goes on.
	h.refused(&SetRecovery{ExpectEpoch: 1, Recovery: sampleRecovery(1, "respawn"), Events: []Event{ev(EventRecovery, "n0", 3, 1, "respawn")}}, ErrRefused)
	h.refused(&SetPlan{ExpectEpoch: 1, Plan: Plan{Nodes: []PlanNode{{Name: "n0"}}}}, ErrRefused)
	// Its successor states the epoch of its takeover.
	h.ok(&SetRecovery{ExpectEpoch: 2, Recovery: sampleRecovery(3, "suspend")})
	h.ok(&SetPlan{ExpectEpoch: 3, Plan: Plan{Nodes: []PlanNode{{Name: "n0"}}}})
	h.f.View(func(s *State) {
		if s.Epoch != 3 || s.Recovery.Stage != "suspend" || len(s.Plan.Nodes) != 1 {
			t.Fatalf("epoch %d, recovery %+v, plan %+v", s.Epoch, s.Recovery, s.Plan)
		}
	})
}

// TestOpaqueRecoveryRecord: a log entry of the retired opaque recovery
// record (type 8) is an error that says so, never a panic, and changes
// nothing; a version-1 snapshot (with an opaque record) is read without it.
func TestOpaqueRecoveryRecord(t *testing.T) {
	var e encoder
	e.byte(byte(typeOpaqueRecovery))
	e.uint(payloadVersion)
	e.uint(0) // no events
	e.uint(2)
	e.bytes([]byte(`{"Epoch":2}`))
	_, err := Decode(e.buf)
	if !errors.Is(err, ErrUnknownCommand) || !strings.Contains(err.Error(), "older ftlaunch") {
		t.Fatalf("decode of an opaque record: %v", err)
	}
	h := newHarness(t)
	h.launch(4)
	before := h.f.Digest()
	if resp, ok := h.f.Apply(&raft.Log{Index: 100, Term: 1, Type: raft.LogCommand, Data: e.buf}).(error); !ok || !errors.Is(resp, ErrUnknownCommand) {
		t.Fatalf("apply of an opaque record: %v", resp)
	}
	if h.f.Digest() != before {
		t.Fatal("an opaque record changed the state")
	}

	// A version-1 snapshot: the same fields, then the opaque record's
	// epoch and bytes, then the writers.
	st := h.f.Copy()
	st.Applied = map[string]uint64{"w": 3}
	v2 := st.marshal()
	var old encoder
	old.buf = append(old.buf, snapshotMagic...)
	old.uint(1)
	body := v2[len(snapshotMagic)+1:]       // after the version (one byte)
	body = body[:len(body)-len(tail(st))-1] // before the recovery flag (none)
	old.buf = append(old.buf, body...)
	old.uint(2)
	old.bytes([]byte(`{"Epoch":2}`))
	old.buf = append(old.buf, tail(st)...)
	got, err := unmarshalState(old.buf)
	if err != nil {
		t.Fatalf("version-1 snapshot: %v", err)
	}
	if got.Digest() != st.Digest() {
		t.Fatal("version-1 snapshot read back differs")
	}
}

// tail is the writers' part of a snapshot, which follows the recovery.
func tail(s *State) []byte {
	var e encoder
	e.uint(uint64(len(s.Applied)))
	for w, n := range s.Applied {
		e.string(w)
		e.uint(n)
	}
	return e.buf
}
