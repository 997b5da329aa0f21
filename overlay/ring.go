package overlay

import (
	"fmt"
	"slices"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// The ring exchange is a scan over the tree. Going up, a subtree describes
// its members as ranges of consecutive member ids, each with the values of
// its first and last member only; a node merges the ranges of its children
// and its own members, joining ranges that touch. Going down, each range a
// node sent up comes back with the neighbours of its two ends, and the node
// hands each child the neighbours of that child's ranges. When the member
// ids of a subtree are contiguous (block placement), every message holds a
// handful of ranges, whatever the size of the job. Ranges separated by a gap
// of ids are joined only at the root, which alone knows that no member lies
// in between.

// ringRange is a run of consecutive member ids with the values of its ends.
type ringRange struct {
	lo, hi   int
	vlo, vhi []byte
}

// ringPiece is a range contributed by a local member (child < 0) or a child.
type ringPiece struct {
	ringRange
	child int
}

// ringGroup is a run of touching pieces: one range sent up.
type ringGroup struct{ first, last int }

// ringState is what a node keeps of a ring between its up and down phases.
type ringState struct {
	pieces []ringPiece
	groups []ringGroup
}

// ringNbr holds the neighbours of the two ends of a range.
type ringNbr struct{ left, right Entry }

func buildRing(c *coll) (*ringState, error) {
	rs := &ringState{}
	for _, m := range c.t.members {
		v := c.local[m]
		rs.pieces = append(rs.pieces, ringPiece{ringRange{lo: m, hi: m, vlo: v, vhi: v}, -1})
	}
	for ci, u := range c.ups {
		if u == nil {
			continue
		}
		for _, r := range u.ranges {
			rs.pieces = append(rs.pieces, ringPiece{r, ci})
		}
	}
	slices.SortFunc(rs.pieces, func(a, b ringPiece) int { return cmpInt(a.lo, b.lo) })
	for i, p := range rs.pieces {
		if i > 0 && p.lo <= rs.pieces[i-1].hi {
			return nil, fmt.Errorf("ring %v: members %d..%d overlap %d..%d: %w",
				c.id, p.lo, p.hi, rs.pieces[i-1].lo, rs.pieces[i-1].hi, ErrConflict)
		}
		if i == 0 || p.lo != rs.pieces[i-1].hi+1 {
			rs.groups = append(rs.groups, ringGroup{first: i, last: i})
		} else {
			rs.groups[len(rs.groups)-1].last = i
		}
	}
	return rs, nil
}

// groupRanges returns the ranges this node sends up.
func (rs *ringState) groupRanges() []ringRange {
	out := make([]ringRange, len(rs.groups))
	for i, g := range rs.groups {
		f, l := rs.pieces[g.first], rs.pieces[g.last]
		out[i] = ringRange{lo: f.lo, hi: l.hi, vlo: f.vlo, vhi: l.vhi}
	}
	return out
}

// rootNeighbours closes the ring at the root: the ranges are all the
// members, so each range's neighbours are the ends of the ranges before and
// after it, wrapping around.
func (rs *ringState) rootNeighbours() []ringNbr {
	g := rs.groupRanges()
	m := len(g)
	out := make([]ringNbr, m)
	for j := range g {
		l, r := g[(j-1+m)%m], g[(j+1)%m]
		out[j] = ringNbr{left: Entry{Member: l.hi, Data: l.vhi}, right: Entry{Member: r.lo, Data: r.vlo}}
	}
	return out
}

// finishRing resolves the neighbours of every piece from the neighbours of
// the groups, sends each child its share and delivers the local results.
func (e *Engine) finishRing(c *coll, nb []ringNbr, size int, fx *effects) {
	rs, t := c.ring, c.t
	downs := make([][]ringNbr, len(t.children))
	for gi, g := range rs.groups {
		for i := g.first; i <= g.last; i++ {
			p := rs.pieces[i]
			left, right := nb[gi].left, nb[gi].right
			if i > g.first {
				q := rs.pieces[i-1]
				left = Entry{Member: q.hi, Data: q.vhi}
			}
			if i < g.last {
				q := rs.pieces[i+1]
				right = Entry{Member: q.lo, Data: q.vlo}
			}
			if p.child < 0 {
				fx.results = append(fx.results, Result{ID: c.id, Op: OpRing, Member: p.lo, Left: left, Right: right, Size: size})
			} else {
				downs[p.child] = append(downs[p.child], ringNbr{left: left, right: right})
			}
		}
	}
	for ci, list := range downs {
		if len(list) == 0 {
			continue
		}
		enc := header(kindDown, OpRing, c.id).Uint(uint64(size)).Uint(uint64(len(list)))
		for _, x := range list {
			enc.Uint(uint64(x.left.Member)).Bytes(x.left.Data).Uint(uint64(x.right.Member)).Bytes(x.right.Data)
		}
		fx.outs = append(fx.outs, outMsg{to: t.children[ci].ID, data: enc.Data()})
	}
	e.finish(c.id)
}

func encodeRanges(enc *wire.Encoder, rs []ringRange) {
	enc.Uint(uint64(len(rs)))
	for _, r := range rs {
		enc.Uint(uint64(r.lo)).Uint(uint64(r.hi - r.lo)).Bytes(r.vlo)
		if r.hi > r.lo {
			enc.Bytes(r.vhi)
		}
	}
}

// decodeRanges reads a child's ranges: sorted, disjoint, covering exactly
// members ids.
func decodeRanges(d *wire.Decoder, members int) ([]ringRange, error) {
	k := d.Count(3)
	out := make([]ringRange, 0, k)
	prevHi, sum := -1, 0
	for range k {
		lo, delta := d.Uint(), d.Uint()
		vlo := d.Bytes()
		vhi := vlo
		if delta > 0 {
			vhi = d.Bytes()
		}
		if d.Err() != nil {
			break
		}
		if lo > MaxMember || delta > MaxMember-lo {
			return nil, fmt.Errorf("range %d+%d out of range", lo, delta)
		}
		if int(lo) <= prevHi {
			return nil, fmt.Errorf("range at %d out of order", lo)
		}
		if delta >= uint64(members-sum) {
			return nil, fmt.Errorf("ranges cover more than %d members", members)
		}
		sum += int(delta) + 1
		prevHi = int(lo + delta)
		out = append(out, ringRange{lo: int(lo), hi: prevHi, vlo: vlo, vhi: vhi})
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	if sum != members {
		return nil, fmt.Errorf("ranges cover %d members, expected %d", sum, members)
	}
	return out, nil
}

// decodeRingDown reads the size of the ring and the neighbours of the
// ranges this node sent up.
func decodeRingDown(d *wire.Decoder, groups int) ([]ringNbr, int, error) {
	size := d.Uint()
	k := d.Count(4)
	if d.Err() == nil && (k != groups || size > MaxMember+1) {
		return nil, 0, fmt.Errorf("%d ranges of a ring of %d, expected %d ranges", k, size, groups)
	}
	out := make([]ringNbr, 0, k)
	for range k {
		lm, lv, rm, rv := d.Uint(), d.Bytes(), d.Uint(), d.Bytes()
		if d.Err() != nil {
			break
		}
		if lm > MaxMember || rm > MaxMember {
			return nil, 0, fmt.Errorf("neighbour out of range")
		}
		out = append(out, ringNbr{left: Entry{Member: int(lm), Data: lv}, right: Entry{Member: int(rm), Data: rv}})
	}
	if err := d.Err(); err != nil {
		return nil, 0, err
	}
	return out, int(size), nil
}
