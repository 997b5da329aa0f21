package agent

import (
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// Only a rank that exited cleanly strands a collective its node's other
// ranks are in: a failed one is the planner's (a restart policy respawns
// it, and it joins after its roll-back; chaos seed 1887075518865483745
// found a SIGKILLed rank reported stranded between two recoveries), and
// one not started yet (a relaunched agent's) is to be started.
func TestEndedForGood(t *testing.T) {
	a := &Agent{fo: failoverState{exits: map[int]proto.RankStatus{
		0: {Rank: 0},
		1: {Rank: 1, Signal: 9},
		2: {Rank: 2, Code: 3},
		3: {Rank: 3, Code: 127, Reason: "could not start it again"},
	}}}
	for r, want := range []bool{true, false, false, false, false} {
		if got := a.endedForGood(r); got != want {
			t.Errorf("rank %d (%+v): ended for good %v, want %v", r, a.fo.exits[r], got, want)
		}
	}
}

// An answer sent again (to an agent that moved to a backup parent) is
// taken if a rank waits for it, and otherwise ignored: an older answer
// merged again would put back values a later one replaced.
func TestCollDoneTakesResentAnswerOnce(t *testing.T) {
	rp := &rankProc{rank: 0, replies: make(chan *proto.CollResult, 1)}
	a := &Agent{
		sup: supervision{ranks: map[int]*rankProc{0: rp}},
		coll: collectives{
			firstColl: make(chan struct{}),
			colls:     map[uint64]*localColl{},
			sentUp:    map[uint64][]byte{},
			comb:      newCombiner(),
			kv:        map[string][]byte{},
		},
	}
	fence := func(seq uint64, v string) *proto.CollResult {
		return &proto.CollResult{Seq: seq, Op: rankproto.OpFence, KV: map[string][]byte{"k": []byte(v)}}
	}
	a.collDone(fence(3, "old"))
	a.collDone(fence(4, "new"))
	a.collDone(fence(3, "old")) // sent again: had it
	if got := string(a.coll.kv["k"]); got != "new" {
		t.Errorf("after an answer sent again: k = %q, want %q", got, "new")
	}
	// A collective the rank still waits for is answered, whatever came
	// before it.
	a.coll.colls[2] = &localColl{op: rankproto.OpFence, values: map[int][]byte{0: nil}}
	a.collDone(fence(2, "older"))
	select {
	case res := <-rp.replies:
		if res.Seq != 2 {
			t.Errorf("rank 0 got the answer of %d, want 2", res.Seq)
		}
	default:
		t.Error("rank 0, waiting in collective 2, got no answer")
	}
	if len(a.coll.colls) != 0 {
		t.Errorf("collectives still open: %v", a.coll.colls)
	}
}
