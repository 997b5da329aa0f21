package launcher

import (
	"slices"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// ReplicaPeers lists, by index, the replica hosts (hosts: agents' indexes)
// whose agent is up and listens: at gives its node's name and its address
// ("" while it is not up or has none), what the root's children are told
// (MReplicas).
func ReplicaPeers(hosts map[int]bool, at func(agent int) (name, addr string)) []proto.PeerAddr {
	var ps []proto.PeerAddr
	for i := range hosts {
		if name, addr := at(i); addr != "" {
			ps = append(ps, proto.PeerAddr{Idx: i, Name: name, Addr: addr})
		}
	}
	slices.SortFunc(ps, func(x, y proto.PeerAddr) int { return x.Idx - y.Idx })
	return ps
}
