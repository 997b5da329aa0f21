package agent

import (
	"fmt"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The agent's part in collectives: its ranks' contributions combined into
// one per node, sent up, and the answer handed to every rank.

type localColl struct {
	op     rankproto.Op
	values map[int][]byte
}

// strandedMsg reports a rank that ended while other ranks wait for it in a
// collective: without it they would wait forever.
const strandedMsg = "ended without joining a collective call (barrier, fence, allgather, …) that other ranks are waiting in"

// endedForGood reports whether local rank r's end is final (under mu):
// it exited cleanly. A rank that failed is the planner's to restart or to
// end the job for (a restart policy's respawn joins the collective after
// its roll-back), and one not started yet (a relaunched agent's) is to be
// started: neither is stranding anyone.
func (a *Agent) endedForGood(r int) bool {
	s, ok := a.fo.exits[r]
	return ok && s.Code == 0 && s.Signal == 0 && s.Reason == ""
}

// contribute records rank's part in its next collective and, once every
// local rank has made it, sends the node's contribution up. It returns the
// collective's sequence number.
func (a *Agent) contribute(rank int, op rankproto.Op, value []byte) (uint64, error) {
	a.mu.Lock()
	seq, complete, err := a.contributeLocked(rank, op, value)
	a.mu.Unlock()
	if complete {
		if a.tree != nil && a.tree.joined != nil {
			a.tree.joined(seq, op)
		}
		a.sendCombined()
	}
	return seq, err
}

// contributeLocked is contribute's part under mu; complete: the node's
// own part is whole, and handed to the combiner.
func (a *Agent) contributeLocked(rank int, op rankproto.Op, value []byte) (seq uint64, complete bool, err error) {
	if a.sup.rec.suspended {
		return 0, false, errRecovering // answered at once: call again once resumed
	}
	seq = a.coll.seq[rank]
	a.coll.seq[rank]++
	c := a.coll.colls[seq]
	if c == nil {
		c = &localColl{op: op, values: map[int][]byte{}}
		a.coll.colls[seq] = c
	}
	if c.op != op {
		return seq, false, fmt.Errorf("collective %d: rank %d called %s while other ranks called %s", seq, rank, op, c.op)
	}
	c.values[rank] = value
	for r := range a.sup.gone {
		if _, ok := c.values[r]; !ok && a.endedForGood(r) {
			// A local rank that already ended never joins: report it.
			a.send(proto.MAbort, proto.AbortMsg{Rank: r, Code: 1, Msg: strandedMsg, Failed: true, Stranded: true}.Encode())
			delete(a.sup.gone, r) // report once
		}
	}
	if len(c.values) < len(a.sup.order) {
		return seq, false, nil
	}
	up := &proto.Contrib{Seq: seq, Op: op}
	for _, r := range a.sup.order {
		up.Ranks = append(up.Ranks, r)
		up.Values = append(up.Values, c.values[r])
	}
	if a.tree != nil {
		up.Covers = []int{a.tree.idx}
	}
	switch op {
	case rankproto.OpFence:
		up.KV = a.coll.puts
		a.coll.puts = map[string][]byte{}
	case proto.OpPMIBarrier:
		up.KV = a.coll.pmiPuts
		a.coll.pmiPuts = map[string][]byte{}
	}
	// Combined with the children's parts, and sent up once they are in
	// (combine.go).
	a.coll.comb.add(-1, up, a.sup.rec.coll)
	return seq, true, nil
}

// collDone delivers a collective's result to every local rank.
func (a *Agent) collDone(res *proto.CollResult) {
	a.coll.firstCollOnce.Do(func() { close(a.coll.firstColl) })
	a.mu.Lock()
	c := a.coll.colls[res.Seq]
	if c == nil && a.coll.seen.has(res.Seq) {
		a.mu.Unlock()
		return // an answer taken already (sent again after a move)
	}
	a.coll.seen.take(res.Seq)
	delete(a.coll.colls, res.Seq)
	delete(a.coll.sentUp, res.Seq)
	a.coll.comb.done(res.Seq)
	switch res.Op {
	case rankproto.OpPublish:
		if a.sup.rec.table == nil {
			a.sup.rec.table = res.Values // the node table, patched by recoveries
		}
	case rankproto.OpFence:
		for k, v := range res.KV {
			a.coll.kv[k] = v
		}
	case proto.OpPMIBarrier:
		for k, v := range res.KV {
			a.coll.pmiKV[k] = v
		}
	}
	a.mu.Unlock()
	if c == nil {
		return
	}
	for r := range c.values {
		if rp := a.rank(r); rp != nil {
			rp.deliver(res)
		}
	}
}

func (a *Agent) put(key string, value []byte) {
	a.mu.Lock()
	a.coll.puts[key] = value
	a.mu.Unlock()
}

func (a *Agent) get(key string) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.coll.puts[key]; ok {
		return v, true
	}
	v, ok := a.coll.kv[key]
	return v, ok
}
