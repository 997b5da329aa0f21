package agent

// The agent's member of the job's gossip cluster (launch/root/gossip.go,
// docs/membership.md): it joins in the background once the agent has its
// share of the job, answers probes and gossips until the agent ends. The
// root reads the evidence; the agent decides nothing from it.

import (
	"context"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ftlaunch/ftlaunch/membership"
)

// rejoinAfter is when an agent exchanges the cluster's state with the
// root again after joining.
const rejoinAfter = time.Second

func (a *Agent) joinGossip(ctx context.Context, wg *sync.WaitGroup) {
	g := a.spec.Gossip
	if g == nil || a.tree == nil {
		return
	}
	cfg := membership.Config{
		Name: a.spec.Node, Incarnation: a.incarnation(), Role: "agent", Secret: g.Secret, Label: a.spec.JobID,
	}
	if a.spec.Timing.FastGossip {
		cfg.Profile = membership.TestProfile()
	}
	if a.spec.Replica.JobDir != "" {
		cfg.Role = "replica"
	}
	port := strconv.Itoa(g.Port)
	conn, _ := a.link.Conn.(net.Conn)
	if a.spec.Launch.Mode == "local" {
		cfg.BindAddr = "127.0.0.1" // a test node
	} else if la, ok := addrOf(conn, true); ok && !la.IP.IsLoopback() {
		// Where its parent reaches it is where the others will.
		cfg.AdvertiseAddr = la.IP.String()
	}
	if ra, ok := addrOf(conn, false); ok && a.spec.RootChild {
		cfg.Seeds = append(cfg.Seeds, net.JoinHostPort(ra.IP.String(), port))
	}
	for _, h := range g.Hosts {
		if s := net.JoinHostPort(h, port); !slices.Contains(cfg.Seeds, s) {
			cfg.Seeds = append(cfg.Seeds, s)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if at := reachRoot(ctx, cfg.Seeds); at != "" {
			// The front-end advertises one of its addresses (its
			// default route's), which this host may not reach.
			cfg.Redirect = map[string]string{membership.RootName: at}
		}
		m, err := membership.Start(ctx, cfg)
		if err != nil {
			if ctx.Err() == nil {
				a.trace.Logf("gossip: %v (the tree's heartbeats still watch this agent)", err)
			}
			return
		}
		defer m.Shutdown()
		a.fo.member.Store(m) // its acks are an upward path (selffence.go)
		defer a.fo.member.Store(nil)
		a.trace.Logf("joined the job's gossip cluster (%d members)", m.NumMembers())
		// Agents that joined the root back to back learn of each other
		// only at the next full exchange (30 s): one more with the root,
		// once the others have joined, and every member probes every
		// other (a death is then confirmed by several, and declared in
		// 1-2 s rather than at the unconfirmed bound).
		again := time.After(rejoinAfter)
		for {
			select {
			case <-again:
				_, _ = m.Join(ctx, cfg.Seeds)
			case <-ctx.Done():
				return
			case ev, ok := <-m.Events():
				if !ok {
					return
				}
				a.mu.Lock()
				to := a.fo.gossipTo
				a.mu.Unlock()
				if to != nil {
					select {
					case to <- ev: // the successor root this agent runs
					default: // it is behind: evidence is advice, the heartbeats remain
					}
				}
			}
		}
	}()
}

// reachRoot returns the first of the front-end's gossip addresses (seeds)
// to accept a connection within a second, or "". They are tried at once.
func reachRoot(ctx context.Context, seeds []string) string {
	if len(seeds) == 1 {
		return seeds[0]
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	won := make(chan string, len(seeds))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", s)
			if err != nil {
				won <- ""
				return
			}
			c.Close()
			won <- s
		}()
	}
	for range seeds {
		if s := <-won; s != "" {
			cancel()
			return s
		}
	}
	return ""
}

// addrOf returns conn's local (or remote) TCP address, if it has one.
func addrOf(conn net.Conn, local bool) (*net.TCPAddr, bool) {
	if conn == nil {
		return nil, false
	}
	addr := conn.RemoteAddr()
	if local {
		addr = conn.LocalAddr()
	}
	ta, ok := addr.(*net.TCPAddr)
	return ta, ok
}
