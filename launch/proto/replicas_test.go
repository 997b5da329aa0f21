package proto

import (
	"slices"
	"testing"
)

// TestReplicasRefresh: a new list of replica agents is taken only once the
// first was sent, and only when it differs.
func TestReplicasRefresh(t *testing.T) {
	a := []PeerAddr{{Idx: 0, Name: "n0", Addr: "10.0.0.1:7000"}, {Idx: 1, Name: "n1", Addr: "10.0.0.2:7000"}}
	b := []PeerAddr{{Idx: 0, Name: "n0", Addr: "10.0.0.1:7000"}, {Idx: 1, Name: "spare0", Addr: "10.0.0.9:7100"}}
	for _, c := range []struct {
		name    string
		before  []PeerAddr
		ps      []PeerAddr
		changed bool
		after   []PeerAddr
	}{
		{"first list not sent yet", nil, a, false, nil},
		{"the same", a, slices.Clone(a), false, a},
		{"a host's replica joined again elsewhere", a, b, true, b},
	} {
		r := Replicas{Peers: c.before, FrontEndVotes: true}
		if got := r.Refresh(c.ps); got != c.changed || !slices.Equal(r.Peers, c.after) || !r.FrontEndVotes {
			t.Errorf("%s: changed %v, peers %v; want %v, %v", c.name, got, r.Peers, c.changed, c.after)
		}
	}
}
