package proto

import (
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
)

// A ring's answer goes down as the scan: each subtree receives only its
// ranks' neighbours' values that it does not hold, and with what it holds
// every rank finds both neighbours.
func TestRingFor(t *testing.T) {
	const n = 8
	full := &CollResult{Seq: 3, Op: rankproto.OpRing}
	for r := range n {
		full.Values = append(full.Values, []byte{byte(r)})
	}
	for _, tc := range []struct {
		ranks, have []int
		want        []int // ranks whose values are sent
	}{
		{ranks: []int{2, 3}, have: []int{2, 3}, want: []int{1, 4}},
		{ranks: []int{0, 1, 2, 3}, have: []int{0, 1, 2, 3}, want: []int{4, 7}},
		{ranks: []int{5}, want: []int{4, 6}},
		{ranks: []int{0, 1, 2, 3, 4, 5, 6, 7}, have: []int{0, 1, 2, 3, 4, 5, 6, 7}},
	} {
		have := map[int]bool{}
		held := map[int][]byte{}
		for _, r := range tc.have {
			have[r], held[r] = true, []byte{byte(r)}
		}
		sub := full.RingFor(tc.ranks, have)
		got, err := DecodeCollResult(sub.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Ranks, tc.want) || got.Size() != n {
			t.Errorf("ranks %v holding %v: sent %v of %d, want %v of %d", tc.ranks, tc.have, got.Ranks, got.Size(), tc.want, n)
		}
		all := got.WithValues(held)
		for _, r := range tc.ranks {
			for _, nb := range []int{(r + n - 1) % n, (r + 1) % n} {
				if v, ok := all.Value(nb); !ok || !slices.Equal(v, []byte{byte(nb)}) {
					t.Errorf("ranks %v: rank %d's neighbour %d: %v, %v", tc.ranks, r, nb, v, ok)
				}
			}
		}
	}
	if _, err := DecodeCollResult((&CollResult{N: 4, Ranks: []int{2, 1}, Values: [][]byte{{1}, {2}}}).Encode()); err == nil {
		t.Error("unsorted sparse ranks decoded")
	}
}
