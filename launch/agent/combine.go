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
	// full: the root merges (FTLAUNCH_COLL_ROOT_MERGE, for make
	// bench-coll): a ring's part carries every value, not the scan's.
	full bool
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
	opSet  bool                 // op is known (a part that covers nothing does not say)
	local  bool                 // the node's own ranks' part is in
	from   map[int]bool         // children whose part is in, by agent index
	covers map[int]bool         // agents covered so far
	values map[int][]byte       // by rank (a ring's: the node's ranks' and the ends of its children's runs)
	spans  map[int][]proto.Span // a ring's: the ranks the parts from each child covered, as runs, by child (-1: the node's own); its answer goes down by them
	whole  map[int]bool         // children whose subtree changed since: a ring's answer goes to them whole
	kv     map[string][]byte    // puts, for a key/value collective
	sent   bool                 // the combined contribution went up
}

func newCombiner() combiner { return combiner{open: map[uint64]*partial{}} }

func newPartial() *partial {
	return &partial{spans: map[int][]proto.Span{}, whole: map[int]bool{}, from: map[int]bool{}, covers: map[int]bool{}, values: map[int][]byte{}, kv: map[string][]byte{}}
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
		if p.sent && (!p.opSet || p.op == c.Op) {
			p.take(child, c) // a ring's answer for child must cover it too
		}
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
	p.take(child, c)
	maps.Copy(p.kv, c.KV)
	return combined
}

// take notes the values of c, from child (-1: the node's own ranks), and
// for a ring the ranks it covers.
func (p *partial) take(child int, c *proto.Contrib) {
	for i, r := range c.Ranks {
		p.values[r] = c.Values[i]
	}
	if c.Op == rankproto.OpRing && (len(c.Ranks) > 0 || len(c.Spans) > 0) {
		p.spans[child] = proto.UnionSpans(p.spans[child], c.Covered())
	}
}

// upValues returns the ranks and values a contribution of p carries:
// every value, but for a ring's scan only the ends of the runs covered
// (Spans, returned too), the values its ranks' neighbours outside need.
func (cb *combiner) upValues(p *partial) (ranks []int, values [][]byte, spans []proto.Span) {
	all := slices.Sorted(maps.Keys(p.values))
	if p.op == rankproto.OpRing && !cb.full {
		for _, s := range p.spans {
			spans = proto.UnionSpans(spans, s)
		}
		all = slices.DeleteFunc(proto.SpanEnds(spans), func(r int) bool { _, ok := p.values[r]; return !ok })
	}
	for _, r := range all {
		ranks = append(ranks, r)
		values = append(values, p.values[r])
	}
	return ranks, values, spans
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
		c.Ranks, c.Values, c.Spans = cb.upValues(p)
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
	if a.coll.comb.full {
		a.mu.Unlock()
		return true // the root merges (FTLAUNCH_COLL_ROOT_MERGE)
	}
	if a.coll.comb.open[c.Seq] == nil && a.coll.seen.has(c.Seq) {
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
	if a.coll.comb.full {
		expect = nil // each node's part goes up alone
	}
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
// its ranks' neighbours outside it gave (the scan of docs/collectives.md).
// With the values that went up through this node, each child is sent the
// part its ranks need and do not hold (ringSplit), and the node's own
// ranks take theirs.
func (a *Agent) ringDown(res *proto.CollResult) {
	a.mu.Lock()
	var spans map[int][]proto.Span
	var whole map[int]bool
	known := res.ValueMap()
	if o := a.coll.comb.open[res.Seq]; o != nil {
		spans, whole = maps.Clone(o.spans), maps.Clone(o.whole)
		for r, v := range o.values {
			if _, ok := known[r]; !ok {
				known[r] = v
			}
		}
	}
	a.mu.Unlock()
	if t := a.tree; t != nil {
		t.mu.Lock()
		links := maps.Clone(t.children)
		t.mu.Unlock()
		parts := ringSplit(res.Seq, res.Size(), known, spans, whole, slices.Collect(maps.Keys(links)))
		for idx, l := range links {
			_ = l.Send(proto.MRingResult, parts[idx].Encode())
		}
	}
	a.ringTake(proto.RingPart(res.Seq, res.Size(), known, slices.Collect(maps.Keys(known))))
}

// ringSplit is the scan's step down at a node that holds the values known
// of ring seq (n ranks): each child of children is sent the values its
// ranks need from outside its subtree (the neighbours of the ends of the
// runs its parts covered, spans), or, if the node has no parts from it or
// its subtree changed since (whole: agents moved below it), every value
// the node holds.
func ringSplit(seq uint64, n int, known map[int][]byte, spans map[int][]proto.Span, whole map[int]bool, children []int) map[int]*proto.CollResult {
	out := make(map[int]*proto.CollResult, len(children))
	var all *proto.CollResult
	for _, c := range children {
		if s, ok := spans[c]; ok && !whole[c] {
			out[c] = proto.RingPart(seq, n, known, proto.RingNeeds(s, n))
			continue
		}
		if all == nil {
			all = proto.RingPart(seq, n, known, slices.Collect(maps.Keys(known)))
		}
		out[c] = all
	}
	return out
}

// keptRings is how many answered rings an agent keeps the values of, for
// the root's recall (docs/collectives.md: an answer sent again to a moved
// agent, or one that lacked values after the tree changed).
const keptRings = 8

// ringWait is a ring answered at this node whose answer lacked the values
// some of its ranks need (the tree changed while it was open, or it was
// sent again to this moved agent): they wait for the root's fill.
type ringWait struct {
	ranks []int          // the ranks waiting
	known map[int][]byte // the values held so far
}

// ringTake hands this node's ranks their neighbours' values of a ring's
// answer res (sparse: from ringDown; the whole of what the root holds,
// sent again to a moved agent; or the root's fill to this node's ask),
// with the values the node holds of it. A rank whose neighbours are not
// all known waits, and the node asks the root for them (MRingAsk).
func (a *Agent) ringTake(res *proto.CollResult) {
	a.coll.firstCollOnce.Do(func() { close(a.coll.firstColl) })
	seq, n := res.Seq, res.Size()
	a.mu.Lock()
	known := res.ValueMap()
	hold := func(vals map[int][]byte) {
		for r, v := range vals {
			if _, ok := known[r]; !ok {
				known[r] = v
			}
		}
	}
	if o := a.coll.comb.open[seq]; o != nil {
		hold(o.values)
	}
	hold(a.coll.ringKept[seq])
	c, w := a.coll.colls[seq], a.coll.ringWait[seq]
	var waiting []int
	switch {
	case c != nil:
		waiting = slices.Collect(maps.Keys(c.values))
	case w != nil:
		hold(w.known)
		waiting = w.ranks
	case a.coll.seen.has(seq) && a.coll.ringKept[seq] != nil:
		a.mu.Unlock()
		return // an answer taken already (sent again after a move)
	}
	a.coll.seen.take(seq)
	delete(a.coll.colls, seq)
	delete(a.coll.sentUp, seq)
	a.coll.comb.done(seq)
	a.keepRing(seq, known)
	need := map[int]bool{}
	var ready, missing []int
	for _, r := range waiting {
		lack := false
		for _, nb := range ringNeighbours(r, n) {
			if _, ok := known[nb]; !ok {
				need[nb], lack = true, true
			}
		}
		if lack {
			missing = append(missing, r)
		} else {
			ready = append(ready, r)
		}
	}
	if len(missing) > 0 {
		if a.coll.ringWait == nil {
			a.coll.ringWait = map[uint64]*ringWait{}
		}
		a.coll.ringWait[seq] = &ringWait{ranks: missing, known: known}
	} else {
		delete(a.coll.ringWait, seq)
	}
	a.mu.Unlock()
	for _, r := range ready {
		if rp := a.rank(r); rp != nil {
			rp.deliver(proto.RingPart(seq, n, known, ringNeighbours(r, n)))
		}
	}
	if len(need) > 0 {
		a.trace.Logf("ring %d: %d rank(s) lack neighbours' values: asking the root", seq, len(missing))
		a.send(proto.MRingAsk, proto.RingAsk{Seq: seq, Ranks: slices.Sorted(maps.Keys(need))}.Encode())
	}
}

// ringNeighbours returns the ranks to the left and right of r in a ring
// of n.
func ringNeighbours(r, n int) []int {
	if n <= 0 {
		return nil
	}
	return []int{(r - 1 + n) % n, (r + 1) % n}
}

// keepRing keeps the values this node held of answered ring seq (under
// mu), the latest keptRings of them, for the root's recall.
func (a *Agent) keepRing(seq uint64, known map[int][]byte) {
	if a.coll.ringKept == nil {
		a.coll.ringKept = map[uint64]map[int][]byte{}
	}
	a.coll.ringKept[seq] = known
	if len(a.coll.ringKept) > keptRings {
		seqs := slices.Sorted(maps.Keys(a.coll.ringKept))
		for _, s := range seqs[:len(seqs)-keptRings] {
			delete(a.coll.ringKept, s)
		}
	}
}

// ringRecalled answers the root's recall of ring values (MRingRecall):
// the values this node holds of the ranks asked, none perhaps, sent up in
// every case (the root counts the answers).
func (a *Agent) ringRecalled(ask proto.RingAsk) {
	a.mu.Lock()
	held := map[int][]byte{}
	maps.Copy(held, a.coll.ringKept[ask.Seq])
	if w := a.coll.ringWait[ask.Seq]; w != nil {
		maps.Copy(held, w.known)
	}
	if o := a.coll.comb.open[ask.Seq]; o != nil {
		maps.Copy(held, o.values)
	}
	n := 0
	if a.spec != nil {
		n = a.spec.Size
	}
	a.mu.Unlock()
	a.send(proto.MRingValues, proto.RingPart(ask.Seq, n, held, ask.Ranks).Encode())
}

// ringAsks returns the asks of the rings this node's ranks still wait in,
// sent again on a resync: the one sent may have been lost with the
// parent.
func (a *Agent) ringAsks() []proto.RingAsk {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []proto.RingAsk
	for _, seq := range slices.Sorted(maps.Keys(a.coll.ringWait)) {
		w := a.coll.ringWait[seq]
		need := map[int]bool{}
		for _, r := range w.ranks {
			for _, nb := range ringNeighbours(r, a.spec.Size) {
				if _, ok := w.known[nb]; !ok {
					need[nb] = true
				}
			}
		}
		out = append(out, proto.RingAsk{Seq: seq, Ranks: slices.Sorted(maps.Keys(need))})
	}
	return out
}

// notePassing notes the ranks of a contribution from below child idx that
// passes through this node unchanged (relayed frame p): a ring's answer
// for that child must carry their neighbours' values too, and the node
// holds the values of its runs' ends.
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
	if c.Seq>>32 < a.sup.rec.coll || (a.coll.comb.open[c.Seq] == nil && a.coll.seen.has(c.Seq)) {
		return
	}
	o := a.coll.comb.open[c.Seq]
	if o == nil {
		o = newPartial()
		a.coll.comb.open[c.Seq] = o
	}
	o.take(idx, c)
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
