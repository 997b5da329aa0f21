package launcher

import (
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestReplicaPeers: the replica hosts that are up and listen, by index; a
// host without an address is left out.
func TestReplicaPeers(t *testing.T) {
	addrs := map[int]string{0: "10.0.0.1:7000", 2: "10.0.0.3:7000", 3: ""}
	got := ReplicaPeers(map[int]bool{3: true, 2: true, 0: true}, func(i int) (string, string) {
		return "n" + string(rune('0'+i)), addrs[i]
	})
	want := []proto.PeerAddr{{Idx: 0, Name: "n0", Addr: "10.0.0.1:7000"}, {Idx: 2, Name: "n2", Addr: "10.0.0.3:7000"}}
	if !slices.Equal(got, want) {
		t.Errorf("peers %v, want %v", got, want)
	}
	if got := ReplicaPeers(nil, nil); got != nil {
		t.Errorf("no hosts: %v", got)
	}
}
