package raftstore

import (
	"bytes"
	"testing"
)

// TestFSMSetRecovery: the recovery record is kept, survives a snapshot,
// and an older epoch's record is refused.
func TestFSMSetRecovery(t *testing.T) {
	h := newHarness(t)
	h.refused(&SetRecovery{Epoch: 1, Record: []byte("r1")}, ErrRefused)
	h.launch(8)
	h.ok(&SetRecovery{Epoch: 2, Record: []byte("suspend"), Events: []Event{ev(EventRecovery, "n0", 3, 1, "suspend")}})
	h.ok(&SetRecovery{Epoch: 2, Record: []byte("respawn")}) // the same epoch's next phase
	h.refused(&SetRecovery{Epoch: 1, Record: []byte("old")}, ErrRefused)
	g := snapshotRoundTrip(t, h.f)
	for _, f := range []*FSM{h.f, g} {
		f.View(func(s *State) {
			if s.RecoveryEpoch != 2 || !bytes.Equal(s.Recovery, []byte("respawn")) {
				t.Fatalf("recovery %q of epoch %d, want %q of epoch 2", s.Recovery, s.RecoveryEpoch, "respawn")
			}
		})
	}
	if g.Digest() != h.f.Digest() {
		t.Fatal("the restored state's digest differs")
	}
	c, err := Decode(Encode(&SetRecovery{Epoch: 7, Record: []byte{1, 2}}))
	if sr, ok := c.(*SetRecovery); err != nil || !ok || sr.Epoch != 7 || !bytes.Equal(sr.Record, []byte{1, 2}) {
		t.Fatalf("decode: %#v, %v", c, err)
	}
}
