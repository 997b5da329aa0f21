package root

import "github.com/ftlaunch/ftlaunch/launch/proto"

// The root's part in the ring exchange (docs/collectives.md): proto.Gather
// decides what each agent is sent; the root sends it.

// ringAnswer sends ring seq's answer g down and returns the bytes sent:
// to each child only the values its subtree needs (proto.Gather.RingSplit),
// or every value to every agent under the root merge (rootMergeEnv).
func (fe *frontend) ringAnswer(seq uint64, g proto.Gathered) int64 {
	if fe.rootMerge && len(g.Ring) == fe.opts.N {
		return fe.bcast(proto.MCollResult, g.RingDense(seq).Encode())
	}
	var down int64
	parts := fe.colls.RingSplit(seq, g, fe.topo, fe.ledger().Agent)
	for _, a := range fe.agents {
		if p, ok := parts[a.idx]; ok && a.link != nil && !fe.link(a).Closed && !fe.link(a).Done {
			enc := p.Encode()
			if a.send(proto.MRingResult, enc) == nil { // behind what a move's commit holds
				down += int64(len(enc))
			}
		}
	}
	return down
}

// ringAsk answers agent a's ask for values of an answered ring: from what
// the root holds, else once a recall of every agent's came back.
func (fe *frontend) ringAsk(a *agentHandle, ask proto.RingAsk) {
	var answering []int
	for _, b := range fe.agents {
		if fe.link(b).Live() && b.via != nil {
			answering = append(answering, b.idx)
		}
	}
	did := fe.colls.RingAsk(a.idx, ask, answering)
	switch {
	case did.Answer != nil:
		_ = a.send(proto.MCollResult, did.Answer.Encode())
	case did.Recall != nil:
		fe.verbosef("ring #%d: agent %s lacks %d value(s); asking every agent", ask.Seq&(1<<32-1), a.name, did.Lack)
		fe.bcast(proto.MRingRecall, did.Recall.Encode())
		fe.ringRecallDone(ask.Seq)
	}
}

// ringRecallsCheck looks again at the recalls under way once agents were
// lost (they will not answer).
func (fe *frontend) ringRecallsCheck() {
	for _, seq := range fe.colls.RingRecalls() {
		fe.ringRecallDone(seq)
	}
}

// ringRecallDone sends the agents that asked for ring seq's values what
// they lacked, once the recall is over.
func (fe *frontend) ringRecallDone(seq uint64) {
	fill, ok := fe.colls.RingRecallDone(seq, func(x int) bool {
		l := fe.links().Link(x)
		return !l.Closed && !l.Done && fe.agents[x].via != nil
	})
	if !ok {
		return
	}
	if fill.Lost > 0 {
		fe.warnf("ring #%d: the value of %d rank(s) was lost with its agents: their neighbours get it empty", seq&(1<<32-1), fill.Lost)
	}
	for x, part := range fill.To {
		if b := fe.agents[x]; !fe.link(b).Closed {
			_ = b.send(proto.MCollResult, part.Encode())
		}
	}
}

// ringValues takes agent a's answer to a recall.
func (fe *frontend) ringValues(a *agentHandle, res *proto.CollResult) {
	if fe.colls.RingValues(a.idx, res) {
		fe.ringRecallDone(res.Seq)
	}
}
