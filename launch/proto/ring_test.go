package proto

import (
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// The scan's sets of ranks: runs, their ends (the values a subtree sends
// up) and the neighbours outside them (the values it is sent down).
func TestSpans(t *testing.T) {
	const n = 16
	for _, tc := range []struct {
		ranks []int
		spans []Span
		ends  []int
		needs []int
	}{
		{ranks: []int{5}, spans: []Span{{5, 5}}, ends: []int{5}, needs: []int{4, 6}},
		{ranks: []int{3, 2, 2, 4}, spans: []Span{{2, 4}}, ends: []int{2, 4}, needs: []int{1, 5}},
		{ranks: []int{0, 1, 6, 7, 8, 15}, spans: []Span{{0, 1}, {6, 8}, {15, 15}}, ends: []int{0, 1, 6, 8, 15}, needs: []int{2, 5, 9, 14}},
		{ranks: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, spans: []Span{{0, 15}}, ends: []int{0, 15}},
		{},
	} {
		s := SpansOf(tc.ranks)
		if !slices.Equal(s, tc.spans) || !slices.Equal(SpanEnds(s), tc.ends) || !slices.Equal(RingNeeds(s, n), tc.needs) {
			t.Errorf("ranks %v: spans %v ends %v needs %v, want %v %v %v", tc.ranks, s, SpanEnds(s), RingNeeds(s, n), tc.spans, tc.ends, tc.needs)
		}
		for r := range n {
			if SpansContain(s, r) != slices.Contains(tc.ranks, r) {
				t.Errorf("ranks %v: contains %d: %v", tc.ranks, r, SpansContain(s, r))
			}
		}
	}
	if got := UnionSpans([]Span{{0, 1}, {8, 9}}, []Span{{2, 3}, {6, 6}, {12, 13}}); !slices.Equal(got, []Span{{0, 3}, {6, 6}, {8, 9}, {12, 13}}) {
		t.Errorf("union %v", got)
	}
	if got := UnionSpans([]Span{{0, 5}}, []Span{{2, 3}, {5, 7}}); !slices.Equal(got, []Span{{0, 7}}) {
		t.Errorf("union of overlapping runs %v", got)
	}
}

// A ring's contribution carries its runs; a decoder refuses runs out of
// order.
func TestContribSpans(t *testing.T) {
	c := &Contrib{Seq: 4, Op: rankproto.OpRing, Ranks: []int{2, 5}, Values: [][]byte{{2}, {5}}, Covers: []int{1}, Spans: []Span{{2, 5}}}
	got, err := DecodeContrib(c.Encode())
	if err != nil || !slices.Equal(got.Spans, c.Spans) || !slices.Equal(got.Covered(), []Span{{2, 5}}) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	if plain := (&Contrib{Ranks: []int{3, 4}, Values: [][]byte{nil, nil}}); !slices.Equal(plain.Covered(), []Span{{3, 4}}) {
		t.Errorf("a contribution without runs covers %v", plain.Covered())
	}
	bad := &Contrib{Spans: []Span{{4, 5}, {1, 2}}}
	if _, err := DecodeContrib(bad.Encode()); err == nil {
		t.Error("runs out of order decoded")
	}
	ask := RingAsk{Seq: 1<<32 | 3, Ranks: []int{7, 9}}
	if back, err := DecodeRingAsk(ask.Encode()); err != nil || back.Seq != ask.Seq || !slices.Equal(back.Ranks, ask.Ranks) {
		t.Errorf("ring ask %+v, %v", back, err)
	}
}

// A ring's answer goes down sparse: RingPart picks the values held of
// the ranks asked, WithValues adds what a node kept.
func TestRingPart(t *testing.T) {
	const n = 8
	vals := map[int][]byte{1: {1}, 4: {4}, 7: {7}}
	part := RingPart(3, n, vals, []int{4, 1, 2})
	got, err := DecodeCollResult(part.Encode())
	if err != nil || !slices.Equal(got.Ranks, []int{1, 4}) || got.Size() != n {
		t.Fatalf("part %+v, %v", got, err)
	}
	all := got.WithValues(map[int][]byte{2: {2}, 3: {3}})
	for _, r := range []int{1, 2, 3, 4} {
		if v, ok := all.Value(r); !ok || !slices.Equal(v, []byte{byte(r)}) {
			t.Errorf("rank %d: %v, %v", r, v, ok)
		}
	}
	if _, ok := all.Value(7); ok {
		t.Error("a value not picked came along")
	}
	if _, err := DecodeCollResult((&CollResult{N: 4, Ranks: []int{2, 1}, Values: [][]byte{{1}, {2}}}).Encode()); err == nil {
		t.Error("unsorted sparse ranks decoded")
	}
}
