package root

// Gossip (docs/membership.md; #14 item 1): with a launch tree, the
// front-end and every agent join one memberlist cluster of the job, keyed
// by a secret the root draws and sends in each agent's share of the job
// (over the job's TLS). The front-end's member hears every death the
// cluster agrees on, usually 1-2 s after a crash, while the tree's
// heartbeat takes 5 s. Gossip's "dead" is evidence, not a verdict: the
// root declares a child of its own lost only if its link has also been
// quiet for longer than a heartbeat interval plus confirmQuiet (a live
// agent writes at least once an interval), so a slow or starved agent
// that gossip wrongly condemns, but whose link still speaks, is kept.

import (
	"context"
	"crypto/rand"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/membership"
)

// rootMember is the front-end's name in the gossip cluster (agents use
// their node names, which never take this form).
const rootMember = "ftlaunch-root"

// adoptQuiet is how long after a successor took over a child of the root
// that did not ask for adoption may be declared lost on gossip alone.
const adoptQuiet = 2 * time.Second

// evGossip: evidence from the front-end's member.
type evGossip struct{ ev membership.Evidence }

func (evGossip) isRootEvent() {}

// evGossipCheck: look again at agent a, which gossip declared dead while
// its link still spoke.
type evGossipCheck struct{ a *agentHandle }

func (evGossipCheck) isRootEvent() {}

// startGossip starts the front-end's member, bound to bind ("127.0.0.1"
// for test nodes, else every address), and the spec agents join it with;
// hosts are the addresses agents may reach the front-end at. Evidence goes
// to the event loop. A member that cannot start leaves the job to the
// tree's heartbeats.
func (fe *frontend) startGossip(ctx context.Context, bind string, hosts []string) {
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	m, err := membership.Start(ctx, membership.Config{
		Name: rootMember, Incarnation: 1, Role: "root", Secret: secret, Label: fe.jobID, BindAddr: bind,
		Profile: gossipProfile(fe.opts.Timing),
	})
	if err != nil {
		fe.warnf("gossip: %v; failures are detected by the tree's heartbeats alone", err)
		return
	}
	fe.gossip = m
	_, ps, _ := net.SplitHostPort(m.Addr())
	port, _ := strconv.Atoi(ps)
	fe.gossipSpec = &proto.GossipSpec{Secret: secret, Hosts: hosts, Port: port}
	fe.goFunc(func() { fe.forwardGossip(ctx, m.Events()) })
}

// gossipProfile is the gossip members' timing (nil: ClusterProfile).
func gossipProfile(t proto.Timing) *memberlist.Config {
	if t.FastGossip {
		return membership.TestProfile()
	}
	return nil
}

// forwardGossip passes evidence to the event loop until ctx ends or the
// member stops (the front-end's own, or a successor's replica agent's).
func (fe *frontend) forwardGossip(ctx context.Context, events <-chan membership.Evidence) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			select {
			case fe.events <- evGossip{ev: ev}:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// stopGossip shuts the front-end's member down (its events' goroutine
// ends with the root's context).
func (fe *frontend) stopGossip() {
	if fe.gossip != nil {
		_ = fe.gossip.Shutdown()
	}
}

// gossiped takes one piece of gossip evidence: a death of a child of the
// root that is up is confirmed by its link's silence.
func (fe *frontend) gossiped(ev membership.Evidence) {
	if ev.Kind != membership.KindDead || fe.rec.Ending() {
		return
	}
	var a *agentHandle
	for _, b := range fe.agents {
		if b.name == ev.Node {
			a = b
		}
	}
	switch {
	case a == nil || a.closed || a.done || !a.up || max(ev.Incarnation, 1) != a.inc:
		return // not an agent, or stale: the planner has heard of its end
	case a.rootChild && a.link == nil && fe.launchTmpl != nil && !a.adopted && time.Since(fe.start) > adoptQuiet:
		// A successor's child that has not asked for adoption since it
		// took over, and that gossip finds dead: it will not ask.
		fe.verbosef("gossip: node %s is dead (observed by %s) and did not ask to be adopted", a.name, ev.Observer)
		fe.linkEnded(a, proto.ErrGossipDead)
		return
	case !a.rootChild:
		// Its parent holds its link: the parent confirms the death by
		// the link's silence, as the root does for its own children.
		p := fe.agents[fe.topo.Parent(a.idx)]
		fe.verbosef("gossip: node %s is dead (observed by %s); its parent %s looks at its link", a.name, ev.Observer, p.name)
		_ = p.send(proto.MSuspect, proto.EncodeInt(int64(a.idx)))
		return
	case a.link == nil:
		return
	}
	fe.verbosef("gossip: node %s is dead (observed by %s); its link has been quiet %v", a.name, ev.Observer, a.link.Quiet().Round(time.Millisecond))
	fe.gossipCheck(a, true)
}

// gossipCheck declares a lost if its link has been quiet long enough;
// else, the first time, it looks again once the link would have been.
func (fe *frontend) gossipCheck(a *agentHandle, first bool) {
	if a != fe.agents[a.idx] || a.closed || a.done || fe.rec.Ending() {
		return
	}
	quiet, left := a.link.ConfirmSilence(fe.opts.Heartbeat, fe.opts.Timing)
	if left <= 0 {
		a.link.Conn.Close() // its reader ends; its end is ours to report
		fe.linkEnded(a, proto.ErrGossipDead)
		return
	}
	if !first {
		fe.verbosef("gossip said node %s was dead, but its link spoke %v ago: kept", a.name, quiet.Round(time.Millisecond))
		return
	}
	fe.after(left, evGossipCheck{a: a})
}
