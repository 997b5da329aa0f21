package launcher

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/membership"
)

// StartGossip starts the front-end's member of the job's gossip cluster
// (docs/membership.md), keyed by a secret it draws, bound as g starts
// agents: to every address for agents on other hosts, to loopback for
// local processes posing as nodes (test nodes). It returns the member and
// what every agent is told to join it with (NodeSpec.Gossip): the secret,
// the addresses agents may reach the front-end at and its port. fast
// selects the tests' profile (proto.Timing.FastGossip).
func (g Agents) StartGossip(ctx context.Context, job string, fast bool) (*membership.Member, *proto.GossipSpec, error) {
	bind, hosts := "127.0.0.1", []string{"127.0.0.1"}
	if g.Remote() {
		bind, hosts = "", proto.OwnAddrs()
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	cfg := membership.Config{Name: membership.RootName, Incarnation: 1, Role: "root", Secret: secret, Label: job, BindAddr: bind}
	if fast {
		cfg.Profile = membership.TestProfile()
	}
	m, err := membership.Start(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	_, ps, _ := net.SplitHostPort(m.Addr())
	port, _ := strconv.Atoi(ps)
	return m, &proto.GossipSpec{Secret: secret, Hosts: hosts, Port: port}, nil
}

// ForwardGossip hands each piece of evidence from events (a member's) to
// deliver until events closes, ctx ends, or deliver says it could not
// (false: its receiver ended with ctx).
func ForwardGossip(ctx context.Context, events <-chan membership.Evidence, deliver func(membership.Evidence) bool) {
	for {
		select {
		case ev, ok := <-events:
			if !ok || !deliver(ev) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
