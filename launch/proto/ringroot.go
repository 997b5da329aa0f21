package proto

import (
	"maps"
	"slices"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/topology"
)

// The root's part in the ring exchange's scan (docs/collectives.md, "Ring
// exchange"), decided here and sent by the root: each of its children is
// sent the values its subtree's ranks need from outside it (RingSplit),
// and an agent that lacks values after the tree changed asks for them
// (RingAsk): it is answered from what the root holds, or once a recall of
// every agent's values came back (RingRecallDone).

// RingSplit is the scan's first step down, a ring's answer got of
// collective seq split for the root's children in tree: for each, the
// values of the ranks its subtree needs from outside it, as the tree is
// now (a moved agent's ranks count where it is: agentOf says where a rank
// runs, -1 for nowhere known) and as its parts came up (got.Via), of
// those the root holds. A value the root lacks (the tree changed while
// the ring was open) is asked for by the agent whose rank needs it.
func (g *Gather) RingSplit(seq uint64, got Gathered, tree *topology.Tree, agentOf func(rank int) int) map[int]*CollResult {
	below := map[int][]int{} // ranks by the root's child above their agent
	for x := range tree.N() {
		if tree.Parent(x) == topology.Root {
			below[x] = []int{}
		}
	}
	for r := range g.n {
		if x := agentOf(r); x >= 0 && x < tree.N() {
			if top := tree.Top(x); below[top] != nil {
				below[top] = append(below[top], r)
			}
		}
	}
	out := map[int]*CollResult{}
	for child, ranks := range below {
		need := RingNeeds(SpansOf(ranks), g.n)
		if via, ok := got.Via[child]; ok {
			need = append(need, RingNeeds(via, g.n)...)
		}
		out[child] = RingPart(seq, g.n, got.Ring, need)
	}
	return out
}

// RingDense is a ring's answer g of collective seq whole, every rank's
// value in place, as an allgather's (the root merge:
// FTLAUNCH_COLL_ROOT_MERGE).
func (g Gathered) RingDense(seq uint64) *CollResult {
	dense := &CollResult{Seq: seq, Op: rankproto.OpRing, Values: make([][]byte, len(g.Ring))}
	for r := range dense.Values {
		dense.Values[r] = g.Ring[r]
	}
	return dense
}

// ringRecall is a recall under way: the root asked every agent for the
// values of need, which asking agents lack.
type ringRecall struct {
	known   map[int][]byte // the values held: the root's, and the agents' answers
	need    map[int]bool
	askers  map[int][]int // agent index -> the ranks it asked for
	waiting map[int]bool  // the agents whose answer has not come
}

// RingAsked is what becomes of an agent's ask (Gather.RingAsk): answered
// at once from what the root holds (Answer, for the asker), or the root
// recalls the values it lacks (Lack of them) from every agent (Recall, to
// broadcast; nil: asked for already, by an earlier ask).
type RingAsked struct {
	Answer *CollResult
	Recall *RingAsk
	Lack   int
}

// RingAsk takes agent from's ask for values of an answered ring its ranks
// need. answering are the agents a recall waits for (those up and
// reached); once one is under way, RingRecallDone says when it is over.
func (g *Gather) RingAsk(from int, ask RingAsk, answering []int) RingAsked {
	known := g.rings[ask.Seq]
	lack := slices.DeleteFunc(slices.Clone(ask.Ranks), func(r int) bool { _, ok := known[r]; return ok })
	if len(lack) == 0 {
		return RingAsked{Answer: RingPart(ask.Seq, g.n, known, ask.Ranks)}
	}
	if g.recalls == nil {
		g.recalls = map[uint64]*ringRecall{}
	}
	rr := g.recalls[ask.Seq]
	if rr == nil {
		rr = &ringRecall{known: maps.Clone(known), need: map[int]bool{}, askers: map[int][]int{}}
		if rr.known == nil {
			rr.known = map[int][]byte{}
		}
		g.recalls[ask.Seq] = rr
	}
	rr.askers[from] = append(rr.askers[from], ask.Ranks...)
	fresh := false
	for _, r := range lack {
		fresh = fresh || !rr.need[r]
		rr.need[r] = true
	}
	if !fresh && rr.waiting != nil {
		return RingAsked{} // asked for already
	}
	rr.waiting = map[int]bool{}
	for _, x := range answering {
		rr.waiting[x] = true
	}
	return RingAsked{Lack: len(lack), Recall: &RingAsk{Seq: ask.Seq, Ranks: slices.Sorted(maps.Keys(rr.need))}}
}

// RingValues takes agent from's answer to a recall; it reports whether
// a recall of that ring is under way (RingRecallDone says next whether
// it is over).
func (g *Gather) RingValues(from int, res *CollResult) bool {
	rr := g.recalls[res.Seq]
	if rr == nil {
		return false
	}
	vals := res.ValueMap()
	maps.Copy(rr.known, vals)
	if known := g.rings[res.Seq]; known != nil {
		maps.Copy(known, vals) // for the next ask
	}
	delete(rr.waiting, from)
	return true
}

// RingRecalls are the rings whose recall is under way, in order.
func (g *Gather) RingRecalls() []uint64 { return slices.Sorted(maps.Keys(g.recalls)) }

// RingFill is a recall's end: the values each agent that asked is sent
// (To, by agent index), Lost of them empty (their only holders were lost).
type RingFill struct {
	To   map[int]*CollResult
	Lost int
}

// RingRecallDone ends the recall of ring seq once the root holds every
// value asked for, or every agent it waits for answered or can no longer
// (answering reports false for it: lost, done, or not reached): a value
// no agent holds comes empty. It reports false while the recall waits
// (or none is under way).
func (g *Gather) RingRecallDone(seq uint64, answering func(agent int) bool) (RingFill, bool) {
	rr := g.recalls[seq]
	if rr == nil {
		return RingFill{}, false
	}
	for x := range rr.waiting {
		if !answering(x) {
			delete(rr.waiting, x)
		}
	}
	complete := !slices.ContainsFunc(slices.Collect(maps.Keys(rr.need)), func(r int) bool { _, ok := rr.known[r]; return !ok })
	if !complete && len(rr.waiting) > 0 {
		return RingFill{}, false
	}
	delete(g.recalls, seq)
	fill := maps.Clone(rr.known)
	out := RingFill{To: map[int]*CollResult{}}
	for r := range rr.need {
		if _, ok := fill[r]; !ok {
			fill[r] = []byte{}
			out.Lost++
		}
	}
	for x, ranks := range rr.askers {
		out.To[x] = RingPart(seq, g.n, fill, ranks)
	}
	return out, true
}
