package proto

import "net"

// ForNode is the template s as one node's agent is told it: its node's
// name, index and ranks, and the IP its parent saw it connect from (up:
// host:port; none if it does not parse), which it advertises.
func (s NodeSpec) ForNode(node string, id int, ranks []int, up string) NodeSpec {
	s.Node, s.NodeID, s.Ranks = node, id, ranks
	if host, _, err := net.SplitHostPort(up); err == nil {
		s.Addr = host
	}
	return s
}
