package proto

import (
	"maps"
	"slices"
)

// The ring exchange's scan (docs/collectives.md, "Ring exchange") works
// on sets of ranks kept as runs of consecutive ranks: a subtree's ranks
// are a few runs (one per level of a breadth-first tree under block
// placement), and of a run only its two ends have a neighbour outside it.

// Span is a run of consecutive ranks, Lo to Hi inclusive.
type Span struct{ Lo, Hi int }

// SpansOf returns the runs of ranks (in any order, repeats allowed),
// sorted.
func SpansOf(ranks []int) []Span {
	rs := slices.Sorted(slices.Values(ranks))
	var out []Span
	for _, r := range rs {
		if n := len(out); n > 0 && r <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, r)
			continue
		}
		out = append(out, Span{r, r})
	}
	return out
}

// UnionSpans returns the runs covering a and b (each sorted, as SpansOf
// returns them).
func UnionSpans(a, b []Span) []Span {
	all := append(slices.Clone(a), b...)
	slices.SortFunc(all, func(x, y Span) int { return x.Lo - y.Lo })
	var out []Span
	for _, s := range all {
		if n := len(out); n > 0 && s.Lo <= out[n-1].Hi+1 {
			out[n-1].Hi = max(out[n-1].Hi, s.Hi)
			continue
		}
		out = append(out, s)
	}
	return out
}

// SpansContain reports whether rank r is in the runs s (sorted).
func SpansContain(s []Span, r int) bool {
	i, _ := slices.BinarySearchFunc(s, r, func(x Span, r int) int {
		switch {
		case x.Hi < r:
			return -1
		case x.Lo > r:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].Lo <= r && r <= s[i].Hi
}

// SpanEnds returns the ends of the runs s: the ranks whose values a
// subtree covering s sends up in a ring, sorted.
func SpanEnds(s []Span) []int {
	var out []int
	for _, x := range s {
		out = append(out, x.Lo)
		if x.Hi != x.Lo {
			out = append(out, x.Hi)
		}
	}
	return out
}

// RingNeeds returns the ranks, of n in the ring, whose values the ranks of
// s need and do not hold: the neighbours of the runs' ends outside s,
// sorted.
func RingNeeds(s []Span, n int) []int {
	if n <= 0 {
		return nil
	}
	need := map[int]bool{}
	for _, x := range s {
		for _, r := range []int{(x.Lo - 1 + n) % n, (x.Hi + 1) % n} {
			if !SpansContain(s, r) {
				need[r] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(need))
}

// SpanSize is the number of ranks in s.
func SpanSize(s []Span) int {
	n := 0
	for _, x := range s {
		n += x.Hi - x.Lo + 1
	}
	return n
}
