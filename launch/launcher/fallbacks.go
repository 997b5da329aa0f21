package launcher

import (
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/topology"
)

// FallbackPeers is what an agent is told of the parents to try beyond its
// backup (xs, in order: recovery.Links.Fallbacks): where each listens, the
// root (topology.Root) as root says, an agent as addr says. One with no
// address yet is left out. told lists the parents in ps, as the planner
// names them (recovery.FallbacksTold).
func FallbackPeers(xs []int, root proto.PeerAddr, addr func(int) proto.PeerAddr) (ps []proto.PeerAddr, told []int) {
	for _, x := range xs {
		p := root
		if x != topology.Root {
			p = addr(x)
		}
		if p.Addr != "" {
			ps, told = append(ps, p), append(told, x)
		}
	}
	return ps, told
}
