package root

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/output"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
	"github.com/ftlaunch/ftlaunch/recovery"
	"github.com/ftlaunch/ftlaunch/topology"
)

// sent records what the root writes on one link.
type sent struct{ bytes.Buffer }

func (s *sent) Close() error { return nil }

// frames returns the frames written since the last call, relayed ones
// (MRoute, MBcast) unwrapped: their type and payload, and to whom.
func (s *sent) frames(t *testing.T) (typs []uint8, ps [][]byte, dsts []int) {
	t.Helper()
	for s.Len() > 0 {
		f, err := wire.ReadFrame(&s.Buffer, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		dst, typ, p := -1, f.Type, f.Payload
		if typ == proto.MRoute || typ == proto.MBcast {
			if dst, typ, p, err = proto.Unwrap(p, typ == proto.MRoute); err != nil {
				t.Fatal(err)
			}
		}
		typs, ps, dsts = append(typs, typ), append(ps, p), append(dsts, dst)
	}
	return typs, ps, dsts
}

// ringRoot is a root of four agents with two ranks each (rank r on agent
// r/2): agents 0 and 1 its children, 2 below 0 and 3 below 1.
func ringRoot(t *testing.T) (*frontend, []*sent) {
	fe := &frontend{opts: Options{N: 8}, ioState: ioState{out: output.NewWriter(io.Discard, io.Discard, false)},
		colls: proto.NewGather(8), liveN: 4}
	fe.rec = recovery.New(recovery.Config{Policy: recovery.Rank, Ranks: 8, Agents: 4, RankAgent: []int{0, 0, 1, 1, 2, 2, 3, 3},
		Up: []bool{true, true, true, true}})
	var links []*sent
	for i := range 4 {
		s := &sent{}
		links = append(links, s)
		fe.agents = append(fe.agents, &agentHandle{idx: i, name: fmt.Sprintf("node%d", i), ranks: []int{2 * i, 2*i + 1}, inc: 1})
	}
	tree, err := topology.FromEdges("kary:2", []topology.Edge{
		{Name: "node0", Parent: topology.Root, Backup: topology.None},
		{Name: "node1", Parent: topology.Root, Backup: topology.None},
		{Name: "node2", Parent: 0, Backup: 1},
		{Name: "node3", Parent: 1, Backup: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	fe.topo = tree
	for _, a := range fe.agents {
		top := fe.agents[tree.Top(a.idx)]
		if top.link == nil {
			top.link = proto.NewLink(links[top.idx])
		}
		a.via = top.link
	}
	return fe, links
}

// ringPart is a ring contribution covering agents covers, with the values
// of its runs' ends (rank r's value is "r").
func ringPart(seq uint64, covers ...int) *proto.Contrib {
	c := &proto.Contrib{Seq: seq, Op: rankproto.OpRing, Covers: covers}
	var ranks []int
	for _, x := range covers {
		ranks = append(ranks, 2*x, 2*x+1)
	}
	c.Spans = proto.SpansOf(ranks)
	for _, r := range proto.SpanEnds(c.Spans) {
		c.Ranks = append(c.Ranks, r)
		c.Values = append(c.Values, []byte(fmt.Sprint(r)))
	}
	return c
}

// The root merges a ring's parts by their runs and sends each child only
// the values its subtree's ranks need from outside it.
func TestRootRingScan(t *testing.T) {
	fe, links := ringRoot(t)
	fe.contribute(fe.agents[0], ringPart(0, 0, 2)) // ranks 0,1 and 4,5: values 0, 1, 4, 5
	fe.contribute(fe.agents[1], ringPart(0, 1, 3)) // ranks 2,3 and 6,7
	if fe.colls.RingKnown(0) == nil {
		t.Fatal("ring not answered")
	}
	for child, want := range map[int][]int{0: {2, 3, 6, 7}, 1: {0, 1, 4, 5}} {
		typs, ps, _ := links[child].frames(t)
		if len(typs) != 1 || typs[0] != proto.MRingResult {
			t.Fatalf("child %d sent %v", child, typs)
		}
		res, err := proto.DecodeCollResult(ps[0])
		if err != nil || !slices.Equal(res.Ranks, want) || res.Size() != 8 {
			t.Errorf("child %d sent %+v, %v; want the values of %v", child, res, err, want)
		}
		for i, r := range res.Ranks {
			if string(res.Values[i]) != fmt.Sprint(r) {
				t.Errorf("child %d: rank %d's value %q", child, r, res.Values[i])
			}
		}
	}
	if got := fe.collStats.Totals(); len(got) != 1 || got[0] != (journal.CollTotal{Kind: "ring", Count: 1, Messages: 2, Agents: 4, BytesDown: got[0].BytesDown}) || got[0].BytesDown == 0 {
		t.Errorf("totals %+v", got)
	}
}

// An agent's ask for values of an answered ring (the tree changed while it
// was open) is answered from what the root holds, else after a recall of
// every agent's; a value whose every holder was lost comes empty.
func TestRootRingAsk(t *testing.T) {
	fe, links := ringRoot(t)
	fe.contribute(fe.agents[0], ringPart(0, 0, 2))
	fe.contribute(fe.agents[1], ringPart(0, 1, 3))
	for _, l := range links {
		l.frames(t)
	}
	// Held: rank 5's value came up (an end of agent 0's runs).
	fe.ringAsk(fe.agents[3], proto.RingAsk{Seq: 0, Ranks: []int{5}})
	typs, ps, dsts := links[1].frames(t)
	if len(typs) != 1 || typs[0] != proto.MCollResult || dsts[0] != 3 {
		t.Fatalf("the ask answered with %v to %v", typs, dsts)
	}
	if res, _ := proto.DecodeCollResult(ps[0]); !slices.Equal(res.Ranks, []int{5}) {
		t.Errorf("the ask answered %+v", res)
	}
	// Not held (as after a move: values that were ends of no part that
	// reached the root), so every agent is asked.
	delete(fe.colls.RingKnown(0), 2)
	delete(fe.colls.RingKnown(0), 6)
	fe.ringAsk(fe.agents[2], proto.RingAsk{Seq: 0, Ranks: []int{2, 3, 6}})
	for i, l := range links[:2] {
		typs, ps, _ := l.frames(t)
		if len(typs) != 1 || typs[0] != proto.MRingRecall {
			t.Fatalf("child %d sent %v", i, typs)
		}
		if ask, _ := proto.DecodeRingAsk(ps[0]); !slices.Equal(ask.Ranks, []int{2, 6}) {
			t.Errorf("recall of %v", ask.Ranks)
		}
	}
	// Agent 1 holds 2; agents 0 and 2 hold neither; agent 3 is lost.
	fe.ringValues(fe.agents[1], proto.RingPart(0, 8, map[int][]byte{2: []byte("2")}, []int{2, 6}))
	fe.ringValues(fe.agents[0], proto.RingPart(0, 8, nil, nil))
	fe.ringValues(fe.agents[2], proto.RingPart(0, 8, nil, nil))
	if typs, _, _ := links[0].frames(t); len(typs) != 0 {
		t.Fatalf("filled before agent 3 answered or was lost: %v", typs)
	}
	fe.decide(recovery.LinkLost{Agent: 3, Err: "gone", At: time.Now()}) // its link closed
	fe.ringRecallsCheck()
	typs, ps, dsts = links[0].frames(t)
	if len(typs) != 1 || typs[0] != proto.MCollResult || dsts[0] != 2 {
		t.Fatalf("filled with %v to %v", typs, dsts)
	}
	res, err := proto.DecodeCollResult(ps[0])
	if err != nil || !slices.Equal(res.Ranks, []int{2, 3, 6}) {
		t.Fatalf("fill %+v, %v", res, err)
	}
	for i, want := range []string{"2", "3", ""} {
		if string(res.Values[i]) != want {
			t.Errorf("rank %d's value %q, want %q", res.Ranks[i], res.Values[i], want)
		}
	}
	if left := fe.colls.RingRecalls(); len(left) != 0 {
		t.Errorf("recalls left: %v", left)
	}
}

// Under the root merge (FTLAUNCH_COLL_ROOT_MERGE) a ring's answer is the
// whole of it, to every agent, as an allgather's.
func TestRootRingMerged(t *testing.T) {
	fe, links := ringRoot(t)
	fe.rootMerge = true
	for x := range 4 {
		c := &proto.Contrib{Seq: 0, Op: rankproto.OpRing, Covers: []int{x}, Ranks: []int{2 * x, 2*x + 1}, Values: [][]byte{{byte(2 * x)}, {byte(2*x + 1)}}}
		fe.contribute(fe.agents[x], c)
	}
	for i, l := range links[:2] {
		typs, ps, _ := l.frames(t)
		if len(typs) != 1 || typs[0] != proto.MCollResult {
			t.Fatalf("child %d sent %v", i, typs)
		}
		if res, err := proto.DecodeCollResult(ps[0]); err != nil || len(res.Values) != 8 || res.N != 0 {
			t.Errorf("child %d sent %+v, %v", i, res, err)
		}
	}
	if got := fe.collStats.Totals(); len(got) != 1 || got[0].Messages != 4 || got[0].Agents != 4 {
		t.Errorf("totals %+v", got)
	}
}

// A ring's part for a child of the root whose move is not committed yet
// waits behind what is held for it (the answers it missed), as a
// broadcast does.
func TestRootRingWaitsBehindHeldMove(t *testing.T) {
	fe, links := ringRoot(t)
	fe.agents[1].route.Await(7) // its move (change 7) is being committed
	_ = fe.agents[1].send(proto.MBcast, proto.Wrap(-1, proto.MCollResult, []byte("answer")))
	fe.contribute(fe.agents[0], ringPart(0, 0, 2))
	fe.contribute(fe.agents[1], ringPart(0, 1, 3))
	if typs, _, _ := links[1].frames(t); len(typs) != 0 {
		t.Fatalf("node1 was sent %v while its move's commit was held", typs)
	}
	fe.agents[1].route.Commit(7)
	fe.agents[1].flush()
	if typs, _, _ := links[1].frames(t); !slices.Equal(typs, []uint8{proto.MCollResult, proto.MRingResult}) {
		t.Errorf("node1 was sent %v, want the answer it missed, then its ring part", typs)
	}
}
