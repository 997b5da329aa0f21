package proto

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// Gather merges, at the root, the contributions to the job's collectives
// (docs/collectives.md): each is a subtree's part, combined by the agent
// at its top, and is merged by the agents it covers, so that one sent
// again (after a move to a backup parent, or a failover) counts once. A
// collective is answered once every live agent is covered. The root's
// event loop owns it.
type Gather struct {
	n        int // the job's ranks
	epoch    uint64
	open     map[uint64]*gathering
	answered map[uint64]bool   // collectives answered: never opened again
	answers  map[uint64][]byte // the latest answers, encoded (KeptAnswers)
	// rings are the values the root holds of the latest answered rings
	// (KeptAnswers of them), by rank: an agent's ask is answered from
	// them (RingKnown).
	rings map[uint64]map[int][]byte
	// recalls are the recalls of ring values under way (ringroot.go).
	recalls map[uint64]*ringRecall
}

// gathering is one collective being merged.
type gathering struct {
	op     rankproto.Op
	from   map[int]bool // agents covered by the contributions taken, by index
	msgs   int          // contributions received for it
	values [][]byte
	kv     map[string][]byte
	// A ring's (docs/collectives.md, "Ring exchange"): the values of the
	// runs' ends the contributions carried, by rank, and the ranks that
	// came up through each of the root's children, by index.
	ring map[int][]byte
	via  map[int][]Span
}

// KeptAnswers is how many of the latest collectives' answers a Gather
// keeps for agents that move to a backup parent: the answers their lost
// parent may not have passed on.
const KeptAnswers = 4

// NewGather merges the collectives of a job of n ranks.
func NewGather(n int) *Gather {
	return &Gather{n: n, open: map[uint64]*gathering{}, answered: map[uint64]bool{}, answers: map[uint64][]byte{}, rings: map[uint64]map[int][]byte{}}
}

// Gathered is what became of a contribution (Gather.Add).
type Gathered struct {
	// Mismatch: the contribution's operation is another than Want, the
	// one the collective waits in (nothing was merged).
	Mismatch bool
	Want     rankproto.Op
	// Answer is the collective's answer once every live agent is
	// covered (nil: not yet; a ring's: its values), Encoded its
	// encoding (kept for an agent that moved); a ring's Ring are the
	// values held by rank and Via the ranks that came up through each of
	// the root's children (the root splits the ring's answer by them).
	Answer  *CollResult
	Encoded []byte
	Ring    map[int][]byte
	Via     map[int][]Span
	// Waits: it merged something and the collective waits for more.
	Waits bool
	// Msgs is how many contributions the collective took, Covered how
	// many agents they covered.
	Msgs, Covered int
}

// Add merges contribution c, which came from agent from (below top, the
// root's child it came through), of agents (agents 0 to agents-1; live of
// them take part). A
// contribution of an epoch a recovery abandoned, one to a collective
// answered already, one that covers no agent (the ranks below it all
// ended) and one whose agents are covered already merge nothing.
func (g *Gather) Add(from, top int, c *Contrib, agents, live int) Gathered {
	if c.Seq>>32 < g.epoch || g.answered[c.Seq] {
		// Abandoned; or sent again after a failover (an adopted agent
		// reports what it had not heard answered; the answer may have
		// crossed it), or after a move to a backup parent (the latest
		// answers went to it again ahead of its report).
		return Gathered{}
	}
	covers := c.Covers
	if len(covers) == 0 {
		if len(c.Ranks) == 0 {
			return Gathered{} // covers no agent: the ranks below it all ended
		}
		covers = []int{from} // an agent with no place in a tree
	}
	gc := g.open[c.Seq]
	if gc == nil {
		gc = &gathering{op: c.Op, kv: map[string][]byte{}, from: map[int]bool{}}
		if c.Op != rankproto.OpBarrier && c.Op != rankproto.OpRing && !IsKVOp(c.Op) {
			gc.values = make([][]byte, g.n)
		}
		g.open[c.Seq] = gc
	}
	if gc.op != c.Op {
		return Gathered{Mismatch: true, Want: gc.op}
	}
	gc.msgs++
	if c.Op == rankproto.OpRing {
		// A part covering agents the root has is merged too: its values
		// may be the ends of runs that a moved agent's new path cut.
		if gc.ring == nil {
			gc.ring, gc.via = map[int][]byte{}, map[int][]Span{}
		}
		for i, r := range c.Ranks {
			gc.ring[r] = c.Values[i]
		}
		if len(c.Ranks) > 0 || len(c.Spans) > 0 {
			gc.via[top] = UnionSpans(gc.via[top], c.Covered())
		}
	}
	fresh := false
	for _, x := range covers {
		if x >= 0 && x < agents && !gc.from[x] {
			gc.from[x] = true
			fresh = true
		}
	}
	if !fresh {
		return Gathered{} // covered already: sent again after a move or a failover
	}
	out := Gathered{Msgs: gc.msgs, Covered: len(gc.from)}
	for i, r := range c.Ranks {
		if gc.values != nil && r < len(gc.values) {
			gc.values[r] = c.Values[i]
		}
	}
	maps.Copy(gc.kv, c.KV)
	if len(gc.from) < live {
		out.Waits = true
		return out
	}
	delete(g.open, c.Seq)
	g.answered[c.Seq] = true
	out.Answer = &CollResult{Seq: c.Seq, Op: c.Op, Values: gc.values}
	if IsKVOp(c.Op) {
		out.Answer.KV = gc.kv
	}
	if c.Op == rankproto.OpRing {
		out.Answer = RingPart(c.Seq, g.n, gc.ring, slices.Collect(maps.Keys(gc.ring)))
		out.Ring, out.Via = gc.ring, gc.via
		g.rings[c.Seq] = gc.ring
		if len(g.rings) > KeptAnswers { // the latest, whatever their epochs
			seqs := slices.Sorted(maps.Keys(g.rings))
			for _, s := range seqs[:len(seqs)-KeptAnswers] {
				delete(g.rings, s)
			}
		}
	}
	out.Encoded = out.Answer.Encode()
	g.answers[c.Seq] = out.Encoded
	for s := range g.answers {
		if s+KeptAnswers <= c.Seq {
			delete(g.answers, s)
		}
	}
	return out
}

// RingKnown are the values the root holds of answered ring seq, by rank
// (nil: not one of the latest); an agent's answer to a recall adds to
// them (the map is the Gather's).
func (g *Gather) RingKnown(seq uint64) map[int][]byte { return g.rings[seq] }

// Abandon drops the collectives in flight: a recovery's agents answer
// their ranks that a recovery began, and count collectives afresh under
// epoch.
func (g *Gather) Abandon(epoch uint64) {
	clear(g.open)
	g.epoch = epoch
}

// Epoch is the epoch collectives are counted under; SetEpoch sets it (a
// successor's, from its predecessor's last record).
func (g *Gather) Epoch() uint64         { return g.epoch }
func (g *Gather) SetEpoch(epoch uint64) { g.epoch = epoch }

// Waiting lists the collectives in flight with the agents covered so far
// (each's map is the Gather's: read it only).
func (g *Gather) Waiting(each func(seq uint64, op rankproto.Op, covered map[int]bool)) {
	for seq, gc := range g.open {
		each(seq, gc.op, gc.from)
	}
}

// OpenColl is a collective in flight as people are told of it: its kind,
// its number in its epoch and the agents it waits for, by name.
type OpenColl struct {
	Kind    string
	Seq     uint64
	Joined  int // agents covered so far
	Missing []string
}

// Open lists the collectives in flight, by number, with the agents they wait for,
// names being the agents' by index.
func (g *Gather) Open(names []string) []OpenColl {
	var out []OpenColl
	for _, seq := range slices.Sorted(maps.Keys(g.open)) {
		gc := g.open[seq]
		o := OpenColl{Kind: CollKind(gc.op), Seq: seq & (1<<32 - 1)}
		for i, n := range names {
			if !gc.from[i] {
				o.Missing = append(o.Missing, n)
			}
		}
		o.Joined = len(names) - len(o.Missing)
		out = append(out, o)
	}
	return out
}

// Words says which agents o waited for when the job ran into --timeout,
// naming at most 8.
func (o OpenColl) Words() string {
	const most = 8
	missing, more := o.Missing, ""
	if len(missing) > most {
		missing, more = missing[:most], fmt.Sprintf(" and %d more", len(missing)-most)
	}
	return fmt.Sprintf("at the timeout %s #%d was open: %d of %d agent(s) had joined; waiting for %s%s",
		o.Kind, o.Seq, o.Joined, o.Joined+len(o.Missing), strings.Join(missing, ", "), more)
}

// Answers are the latest answers (KeptAnswers of them), encoded, oldest
// first: what an agent that moved to a new parent gets again.
func (g *Gather) Answers() [][]byte {
	var out [][]byte
	for _, seq := range slices.Sorted(maps.Keys(g.answers)) {
		out = append(out, g.answers[seq])
	}
	return out
}

// CollKind names a collective's kind for people: the rank protocol's
// operations by their names, PMI-1's barrier as pmi-barrier.
func CollKind(op rankproto.Op) string {
	if op == OpPMIBarrier {
		return "pmi-barrier"
	}
	return op.String()
}

// CollStats totals the collectives a root answered: how many, the
// contributions it received for them, the agents they covered and the
// bytes it sent its children with their answers; in all and by kind (the
// state log's record of them: journal.CollTotals).
type CollStats struct {
	Answered int
	Msgs     int
	Down     int64
	kinds    map[string]*journal.CollTotal
}

// Add counts a collective of op answered (got, Gather.Add's), with down
// bytes sent to the root's children.
func (s *CollStats) Add(op rankproto.Op, got Gathered, down int64) {
	s.Answered++
	s.Msgs += got.Msgs
	s.Down += down
	if s.kinds == nil {
		s.kinds = map[string]*journal.CollTotal{}
	}
	kind := CollKind(op)
	k := s.kinds[kind]
	if k == nil {
		k = &journal.CollTotal{Kind: kind}
		s.kinds[kind] = k
	}
	k.Count++
	k.Messages += got.Msgs
	k.Agents += got.Covered
	k.BytesDown += down
}

// Totals returns the totals by kind, in the order of the kinds' names.
func (s *CollStats) Totals() []journal.CollTotal {
	var out []journal.CollTotal
	for _, k := range slices.Sorted(maps.Keys(s.kinds)) {
		out = append(out, *s.kinds[k])
	}
	return out
}

// Words says the totals for --verbose: in all, then by kind.
func (s *CollStats) Words() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d answered; the root received %d message(s) for them and sent down %d byte(s)", s.Answered, s.Msgs, s.Down)
	for i, k := range s.Totals() {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s: %d, %d message(s) covering %d agent(s), %d byte(s) down", sep, k.Kind, k.Count, k.Messages, k.Agents, k.BytesDown)
	}
	if len(s.kinds) > 0 {
		b.WriteString(")")
	}
	return b.String()
}
