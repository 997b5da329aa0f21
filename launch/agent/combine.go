package agent

import (
	"maps"
	"slices"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The agent's combining of collectives inside the launch tree
// (docs/collectives.md): for each collective, the node waits for its own
// ranks' part and one contribution from each child it expects, merges
// them by the agents they cover, and sends one contribution up.

// combiner holds the collectives this node is combining; guarded by the
// agent's mu.
type combiner struct {
	open map[uint64]*partial
	// waived, when set: the node's own ranks all ended for good before
	// collective waived, and join none from it on in its epoch; the node
	// sends up its children's parts without its own, so that the root
	// learns of the collective and finds the node stranding it.
	waived    uint64
	hasWaiver bool
}

// partial is one collective being combined at this node.
type partial struct {
	op     rankproto.Op
	opSet  bool              // op is known (a part that covers nothing does not say)
	local  bool              // the node's own ranks' part is in
	from   map[int]bool      // children whose part is in, by agent index
	covers map[int]bool      // agents covered so far
	values map[int][]byte    // by rank
	ranks  map[int][]int     // the ranks each child's part covered, by child (a ring's answer goes down by them)
	whole  map[int]bool      // children whose subtree changed since: a ring's answer goes to them whole
	kv     map[string][]byte // puts, for a key/value collective
	sent   bool              // the combined contribution went up
}

func newCombiner() combiner { return combiner{open: map[uint64]*partial{}} }

func newPartial() *partial {
	return &partial{ranks: map[int][]int{}, whole: map[int]bool{}, from: map[int]bool{}, covers: map[int]bool{}, values: map[int][]byte{}, kv: map[string][]byte{}}
}

// waive takes the node's own ranks' end for good, before collective seq:
// from seq on, in its epoch, the node waits only for its children.
func (cb *combiner) waive(seq uint64) {
	cb.waived, cb.hasWaiver = seq, true
	if cb.open[seq] == nil {
		cb.open[seq] = newPartial()
	}
}

// ownDone reports whether the node's own part of collective seq, p, is in
// or will never come.
func (cb *combiner) ownDone(seq uint64, p *partial) bool {
	return p.local || (cb.hasWaiver && seq >= cb.waived && seq>>32 == cb.waived>>32)
}

// verdict says what became of a contribution handed to the combiner.
type verdict int

const (
	combined  verdict = iota // merged: the node's one message will carry it
	forward                  // the node's message left already, or the kinds differ: pass it up as it is
	abandoned                // of an epoch a recovery abandoned: dropped
)

// add merges child's contribution c (child < 0: the node's own ranks')
// into collective c.Seq. epoch is the node's current collective epoch:
// a contribution of an older one belongs to a collective a recovery
// abandoned.
func (cb *combiner) add(child int, c *proto.Contrib, epoch uint64) verdict {
	if c.Seq>>32 < epoch {
		return abandoned
	}
	p := cb.open[c.Seq]
	if p == nil {
		p = newPartial()
		cb.open[c.Seq] = p
	}
	empty := len(c.Covers) == 0 && len(c.Ranks) == 0 // a part covering no agent: its ranks all ended
	if p.sent || (!empty && p.opSet && p.op != c.Op) {
		return forward
	}
	if !empty && !p.opSet {
		p.op, p.opSet = c.Op, true
	}
	if child < 0 {
		p.local = true
	} else {
		p.from[child] = true
	}
	for _, x := range c.Covers {
		p.covers[x] = true
	}
	for i, r := range c.Ranks {
		p.values[r] = c.Values[i]
	}
	if child >= 0 {
		p.ranks[child] = append(p.ranks[child], c.Ranks...)
	}
	maps.Copy(p.kv, c.KV)
	return combined
}

// ready returns the combined contributions of the collectives that are
// complete, and marks them sent: the node's own part is in (or it, agent
// self, hosts no ranks: hasRanks false) and so is the part of every child in expect
// (the children linked or still being started; a child lost or moved
// away is not waited for).
func (cb *combiner) ready(self int, expect []int, hasRanks bool) []*proto.Contrib {
	var out []*proto.Contrib
	for _, seq := range slices.Sorted(maps.Keys(cb.open)) {
		p := cb.open[seq]
		if p.sent || (hasRanks && !cb.ownDone(seq, p)) {
			continue
		}
		if slices.ContainsFunc(expect, func(c int) bool { return !p.from[c] }) {
			continue
		}
		p.sent = true
		if !hasRanks {
			p.covers[self] = true
		}
		c := &proto.Contrib{Seq: seq, Op: p.op, Covers: slices.Sorted(maps.Keys(p.covers))}
		for _, r := range slices.Sorted(maps.Keys(p.values)) {
			c.Ranks = append(c.Ranks, r)
			c.Values = append(c.Values, p.values[r])
		}
		if proto.IsKVOp(p.op) {
			c.KV = p.kv
		}
		out = append(out, c)
	}
	return out
}

// done forgets collective seq: answered.
func (cb *combiner) done(seq uint64) { delete(cb.open, seq) }

// abandon drops what the node combined of collectives older than epoch:
// a recovery's Suspend abandoned them. A newer epoch's (a child may hear
// the Suspend, relayed by this node, and contribute again before this
// node takes it) is kept.
func (cb *combiner) abandon(epoch uint64) {
	for seq := range cb.open {
		if seq>>32 < epoch {
			delete(cb.open, seq)
		}
	}
	if cb.hasWaiver && cb.waived>>32 < epoch {
		cb.hasWaiver = false // the ranks restarted under the new epoch
	}
}

// expected lists the children whose parts this node waits for: those
// linked, and those still being started.
func (t *treeState) expected() []int {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Collect(maps.Keys(t.children))
	for c := range t.launching {
		if t.children[c] == nil {
			out = append(out, c)
		}
	}
	return out
}

// combineChild takes child idx's (combined) contribution p. It reports
// whether p is to be passed up unchanged instead.
func (a *Agent) combineChild(idx int, p []byte) bool {
	c, err := proto.DecodeContrib(p)
	if err != nil {
		return true // the root reports it
	}
	a.mu.Lock()
	if a.coll.comb.open[c.Seq] == nil && c.Seq <= a.coll.collSeen {
		a.mu.Unlock()
		return false // answered already: sent again after a move
	}
	v := a.coll.comb.add(idx, c, a.sup.rec.coll)
	a.mu.Unlock()
	switch v {
	case forward:
		return true
	case combined:
		a.sendCombined()
	}
	return false
}

// sendCombined sends up each collective whose parts are all in.
func (a *Agent) sendCombined() {
	expect, self := a.tree.expected(), -1
	if a.tree != nil {
		self = a.tree.idx
	}
	a.mu.Lock()
	ready := a.coll.comb.ready(self, expect, len(a.sup.order) > 0 || self < 0)
	ps := make([][]byte, len(ready))
	for i, c := range ready {
		p := c.Encode()
		ps[i] = p
		if c.Op == proto.OpPMIBarrier {
			a.coll.pmiUp += int64(len(p))
			a.coll.pmiBarrier++
		}
		a.coll.sentUp[c.Seq] = p
	}
	a.mu.Unlock()
	for _, p := range ps {
		a.send(proto.MContrib, p)
	}
}

// ringDown takes a ring's answer for this node's subtree, res: the values
// its ranks' neighbours outside it gave. With the values that went up
// through this node, each child is sent the part its ranks need but does
// not hold (by the ranks of the parts that came through it; a child none
// came through, or whose subtree changed since, gets all this node has),
// and the node's own ranks get theirs.
func (a *Agent) ringDown(res *proto.CollResult) {
	a.mu.Lock()
	per, whole := map[int][]int{}, map[int]bool{}
	var vals map[int][]byte
	if o := a.coll.comb.open[res.Seq]; o != nil {
		per, whole, vals = maps.Clone(o.ranks), maps.Clone(o.whole), maps.Clone(o.values)
	}
	a.mu.Unlock()
	all := res.WithValues(vals) // what came down, and what went up through this node
	if t := a.tree; t != nil {
		t.mu.Lock()
		links := maps.Clone(t.children)
		t.mu.Unlock()
		var enc []byte
		for idx, l := range links {
			if rs, ok := per[idx]; ok && !whole[idx] {
				have := map[int]bool{}
				for _, r := range rs {
					have[r] = true
				}
				_ = l.Send(proto.MRingResult, all.RingFor(rs, have).Encode())
				continue
			}
			if enc == nil {
				enc = all.Encode()
			}
			_ = l.Send(proto.MRingResult, enc)
		}
	}
	a.collDone(all)
}

// notePassing notes the ranks of a contribution from below child idx that
// passes through this node unchanged (relayed frame p): a ring's answer
// for that child must carry their neighbours' values too.
func (a *Agent) notePassing(idx int, p []byte) {
	_, typ, inner, err := proto.Unwrap(p, true)
	if err != nil || typ != proto.MContrib {
		return
	}
	c, err := proto.DecodeContrib(inner)
	if err != nil || c.Op != rankproto.OpRing {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.Seq>>32 < a.sup.rec.coll || (a.coll.comb.open[c.Seq] == nil && c.Seq <= a.coll.collSeen) {
		return
	}
	o := a.coll.comb.open[c.Seq]
	if o == nil {
		o = newPartial()
		a.coll.comb.open[c.Seq] = o
	}
	o.ranks[idx] = append(o.ranks[idx], c.Ranks...)
	for i, r := range c.Ranks {
		o.values[r] = c.Values[i]
	}
}

// rerouted notes that agents now below child via moved there: a ring's
// answer open now goes to that child whole.
func (a *Agent) rerouted(via int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, o := range a.coll.comb.open {
		o.whole[via] = true
	}
}
