package launcher

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/topology"
)

// TestFallbackPeersSkipsUnknownAddresses: an agent is told its fallback
// parents in the planner's order, the root under the name and address it
// is reached at, and none whose address is not known yet (a root reached
// on a socket pair, an agent not up).
func TestFallbackPeersSkipsUnknownAddresses(t *testing.T) {
	addrs := map[int]string{1: "10.0.0.1:7000", 3: "10.0.0.3:7000"} // agent 2 is not up
	addr := func(x int) proto.PeerAddr {
		return proto.PeerAddr{Idx: x, Name: fmt.Sprintf("n%d", x), Addr: addrs[x]}
	}
	root := proto.PeerAddr{Idx: -1, Name: proto.RootName, Addr: "10.0.0.9:7000"}
	for _, tc := range []struct {
		name     string
		xs       []int
		root     proto.PeerAddr
		wantIdx  []int
		wantTold []int
	}{
		{"none", nil, root, nil, nil},
		{"in order", []int{3, 1}, root, []int{3, 1}, []int{3, 1}},
		{"one not up", []int{1, 2, 3}, root, []int{1, 3}, []int{1, 3}},
		{"the root last", []int{1, topology.Root}, root, []int{1, -1}, []int{1, topology.Root}},
		{"the root with no address", []int{topology.Root, 3}, proto.PeerAddr{Idx: -1, Name: proto.RootName}, []int{3}, []int{3}},
	} {
		ps, told := FallbackPeers(tc.xs, tc.root, addr)
		var idx []int
		for _, p := range ps {
			idx = append(idx, p.Idx)
			if p.Addr == "" {
				t.Errorf("%s: %+v told with no address", tc.name, p)
			}
		}
		if !slices.Equal(idx, tc.wantIdx) || !slices.Equal(told, tc.wantTold) {
			t.Errorf("%s: told %v (parents %v), want %v (%v)", tc.name, idx, told, tc.wantIdx, tc.wantTold)
		}
		if len(ps) > 0 && ps[len(ps)-1].Idx == -1 && ps[len(ps)-1] != tc.root {
			t.Errorf("%s: the root told as %+v, want %+v", tc.name, ps[len(ps)-1], tc.root)
		}
	}
}
