package root

import (
	"maps"
	"slices"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The root's part in the ring exchange's scan (docs/collectives.md, "Ring
// exchange"): it merges the values of the runs' ends its children send
// up, sends each child the values its subtree's ranks need from outside
// it, and fills in what an agent lacks after the tree changed (an ask,
// answered from what it holds or by a recall of every agent's).

// ringAnswer sends a ring's answer down, g's values for collective seq
// (proto.Gather keeps them: an agent that moved is sent them again; an
// agent's ask is answered from them). It returns the bytes sent. Under the root merge (FTLAUNCH_COLL_ROOT_MERGE) every value
// goes to every agent, as an allgather's; else each child is sent only
// the values of the ranks its subtree needs (ringSplitRoot).
func (fe *frontend) ringAnswer(seq uint64, g proto.Gathered) int64 {
	n := fe.opts.N
	if fe.rootMerge && len(g.Ring) == n {
		dense := &proto.CollResult{Seq: seq, Op: rankproto.OpRing, Values: make([][]byte, n)}
		for r := range n {
			dense.Values[r] = g.Ring[r]
		}
		return fe.bcast(proto.MCollResult, dense.Encode())
	}
	var down int64
	parts := fe.ringSplitRoot(seq, g)
	for _, a := range fe.agents {
		if p, ok := parts[a.idx]; ok && fe.rootChild(a) && a.link != nil && !fe.link(a).Closed && !fe.link(a).Done {
			enc := p.Encode()
			if a.link.Send(proto.MRingResult, enc) == nil {
				down += int64(len(enc))
			}
		}
	}
	return down
}

// ringSplitRoot is the scan's first step down: for each child of the root,
// the values of the ranks its subtree needs from outside it, as the tree
// is now (a moved agent's ranks count where it is) and as its parts came
// up (g.Via), of those the root holds. A value the root lacks (the tree
// changed while the ring was open) is asked for by the agent whose rank
// needs it (ringAsk).
func (fe *frontend) ringSplitRoot(seq uint64, g proto.Gathered) map[int]*proto.CollResult {
	n := fe.opts.N
	now := map[int][]int{} // ranks by the root's child above their agent
	for r := range fe.ranks {
		node := fe.ledger().Agent(r)
		if node < 0 || node >= len(fe.agents) {
			continue
		}
		top := node
		if fe.topo != nil {
			top = fe.topo.Top(node)
		}
		now[top] = append(now[top], r)
	}
	out := map[int]*proto.CollResult{}
	for _, a := range fe.agents {
		if !fe.rootChild(a) {
			continue
		}
		need := proto.RingNeeds(proto.SpansOf(now[a.idx]), n)
		if via, ok := g.Via[a.idx]; ok {
			need = append(need, proto.RingNeeds(via, n)...)
		}
		out[a.idx] = proto.RingPart(seq, n, g.Ring, need)
	}
	return out
}

// ringRecall is a recall under way: the root asked every agent for the
// values of need, which asking agents lack.
type ringRecall struct {
	known   map[int][]byte // the values held: the root's, and the agents' answers
	need    map[int]bool
	askers  map[int][]int // agent index -> the ranks it asked for
	waiting map[int]bool  // the agents whose answer has not come
}

// ringAsk answers agent a's ask for values of an answered ring its ranks
// need: from what the root holds, else once a recall of every agent's
// came back.
func (fe *frontend) ringAsk(a *agentHandle, ask proto.RingAsk) {
	known := fe.colls.RingKnown(ask.Seq)
	lack := slices.DeleteFunc(slices.Clone(ask.Ranks), func(r int) bool { _, ok := known[r]; return ok })
	if len(lack) == 0 {
		_ = a.send(proto.MCollResult, proto.RingPart(ask.Seq, fe.opts.N, known, ask.Ranks).Encode())
		return
	}
	if fe.recalls == nil {
		fe.recalls = map[uint64]*ringRecall{}
	}
	rr := fe.recalls[ask.Seq]
	if rr == nil {
		rr = &ringRecall{known: maps.Clone(known), need: map[int]bool{}, askers: map[int][]int{}}
		if rr.known == nil {
			rr.known = map[int][]byte{}
		}
		fe.recalls[ask.Seq] = rr
	}
	rr.askers[a.idx] = append(rr.askers[a.idx], ask.Ranks...)
	fresh := false
	for _, r := range lack {
		fresh = fresh || !rr.need[r]
		rr.need[r] = true
	}
	if !fresh && rr.waiting != nil {
		return // asked for already
	}
	rr.waiting = map[int]bool{}
	for _, b := range fe.agents {
		if fe.link(b).Live() && b.via != nil {
			rr.waiting[b.idx] = true
		}
	}
	fe.verbosef("ring #%d: agent %s lacks %d value(s); asking every agent", ask.Seq&(1<<32-1), a.name, len(lack))
	fe.bcast(proto.MRingRecall, proto.RingAsk{Seq: ask.Seq, Ranks: slices.Sorted(maps.Keys(rr.need))}.Encode())
	fe.ringRecallDone(ask.Seq)
}

// ringValues takes agent a's answer to a recall.
func (fe *frontend) ringValues(a *agentHandle, res *proto.CollResult) {
	rr := fe.recalls[res.Seq]
	if rr == nil {
		return
	}
	vals := res.ValueMap()
	maps.Copy(rr.known, vals)
	if known := fe.colls.RingKnown(res.Seq); known != nil {
		maps.Copy(known, vals) // for the next ask
	}
	delete(rr.waiting, a.idx)
	fe.ringRecallDone(res.Seq)
}

// ringRecallsCheck looks again at the recalls under way once agents were
// lost: they will not answer.
func (fe *frontend) ringRecallsCheck() {
	for _, seq := range slices.Sorted(maps.Keys(fe.recalls)) {
		fe.ringRecallDone(seq)
	}
}

// ringRecallDone answers the agents that asked for values of ring seq
// once the root holds every value asked for, or every agent that could
// answer did: a value no agent holds (its only holders were lost) comes
// empty.
func (fe *frontend) ringRecallDone(seq uint64) {
	rr := fe.recalls[seq]
	if rr == nil {
		return
	}
	known := rr.known
	for x := range rr.waiting {
		if b, l := fe.agents[x], fe.links().Link(x); l.Closed || l.Done || b.via == nil {
			delete(rr.waiting, x)
		}
	}
	complete := !slices.ContainsFunc(slices.Collect(maps.Keys(rr.need)), func(r int) bool { _, ok := known[r]; return !ok })
	if !complete && len(rr.waiting) > 0 {
		return
	}
	delete(fe.recalls, seq)
	fill := maps.Clone(known)
	lost := 0
	for r := range rr.need {
		if _, ok := fill[r]; !ok {
			fill[r] = []byte{}
			lost++
		}
	}
	if lost > 0 {
		fe.warnf("ring #%d: the value of %d rank(s) was lost with its agents: their neighbours get it empty", seq&(1<<32-1), lost)
	}
	for x, ranks := range rr.askers {
		if b := fe.agents[x]; !fe.link(b).Closed {
			_ = b.send(proto.MCollResult, proto.RingPart(seq, fe.opts.N, fill, ranks).Encode())
		}
	}
}
