package membership

import (
	"math"
	"time"

	"github.com/hashicorp/memberlist"
)

// ClusterProfile returns memberlist timing tuned for the agents of one job
// on a cluster network. It starts from memberlist.DefaultLANConfig, whose
// every field is explained there, and changes only the fields below. The
// result still has memberlist's placeholder identity (host name, port 7946);
// Start overwrites name, addresses, keys and delegates.
//
// The LAN defaults detect a crash in roughly 10-20 s; this profile aims at
// 2-3 s for 3-1,000 agents. Going much faster makes an agent that is starved
// of CPU (ranks spinning on every core) miss its probe deadlines and be
// declared dead although it is alive. See Bounds.
//
// The returned value is new on every call; the caller may modify it.
func ClusterProfile() *memberlist.Config {
	c := memberlist.DefaultLANConfig()

	// Probe one random peer every 200 ms instead of every second: the probe
	// period is the unit of everything else (first failed probe, suspicion
	// timeout), so this is the main lever on detection time.
	c.ProbeInterval = 200 * time.Millisecond

	// Wait 100 ms for the direct ack instead of 500 ms before asking
	// IndirectChecks peers to probe. Loopback and cluster RTTs are well under
	// a millisecond; 100 ms leaves room for a busy agent's scheduler delay.
	c.ProbeTimeout = 100 * time.Millisecond

	// Suspicion lasts SuspicionMult * max(1, log10(N)) * ProbeInterval once
	// confirmed by another member (0.6 s at N <= 10, 1.2 s at N = 100,
	// 1.8 s at N = 1,000) instead of 4 *.
	c.SuspicionMult = 3

	// An unconfirmed suspicion lasts at most 4 times the above instead of 6:
	// this is the worst case when no second member confirms (small or
	// partitioned clusters), and must stay well above the time a starved
	// agent needs to refute.
	c.SuspicionMaxTimeoutMult = 4

	// Gossip every 100 ms instead of 200 ms, to 3 peers as in LAN: suspect
	// and dead messages reach all N members in about log3(N) rounds.
	c.GossipInterval = 100 * time.Millisecond

	// Streams (join, push/pull, fallback pings) time out after 2 s instead
	// of 10 s: a seed that does not answer within 2 s on a cluster network
	// is down, and Join moves on to the next seed.
	c.TCPTimeout = 2 * time.Second

	// A relaunched agent keeps its name but may come back on a spare node
	// (another address). memberlist refuses a known name from a new address
	// unless the old one has been dead this long (0, the LAN default, means
	// never).
	c.DeadNodeReclaimTime = 2 * time.Second

	// Keep gossiping to a dead member for 10 s instead of 30 s: long enough
	// for a falsely accused agent to hear of its death and refute; a
	// relaunched agent rejoins under a new incarnation anyway.
	c.GossipToTheDeadTime = 10 * time.Second

	// Do not compress. Gossip packets fit in one UDP datagram either way,
	// cluster links have bandwidth to spare, and LZW allocates a fresh
	// table for every packet: on an agent that shares its node with busy
	// ranks, CPU is the scarcer resource (a quarter of memberlist's CPU
	// time in a 100-member test went to compression).
	c.EnableCompression = false

	return c
}

// TestProfile returns ClusterProfile with every timer halved, for tests
// that need a few joins and detections quickly on an idle machine. Do not use
// it on loaded machines: it is below the false-positive threshold of
// ClusterProfile's reasoning.
func TestProfile() *memberlist.Config {
	c := ClusterProfile()
	c.ProbeInterval = 100 * time.Millisecond
	c.ProbeTimeout = 50 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.TCPTimeout = time.Second
	c.PushPullInterval = 5 * time.Second
	c.DeadNodeReclaimTime = time.Second
	c.GossipToTheDeadTime = 5 * time.Second
	return c
}

// Bounds returns the crash-detection time that profile p should give in a
// cluster of n members: typical is what most survivors should see (a
// confirmed suspicion), worst is the bound when no second member confirms
// the suspicion before it expires.
//
// Both sum three phases, measured from the crash:
//   - probing: up to 3 probe periods until a survivor's probe of the crashed
//     member fails (each survivor probes a random-order round of all peers,
//     so some survivor reaches it within about one period; the failed probe
//     itself takes one more), plus one for the confirming probe;
//   - suspicion: SuspicionMult*max(1,log10 n)*ProbeInterval when confirmed
//     (typical), SuspicionMaxTimeoutMult times that when not (worst);
//   - dissemination: about log_GossipNodes(n)+2 gossip intervals for the
//     dead message to reach every survivor.
//
// Lifeguard's awareness may stretch the probe period of an unhealthy
// survivor by up to AwarenessMaxMultiplier; Bounds assumes healthy
// survivors.
func Bounds(p *memberlist.Config, n int) (typical, worst time.Duration) {
	n = max(n, 1)
	scale := math.Max(1, math.Log10(float64(n)))
	minSusp := time.Duration(float64(p.SuspicionMult) * scale * float64(p.ProbeInterval))
	maxSusp := time.Duration(p.SuspicionMaxTimeoutMult) * minSusp
	gossip := spreadTime(p.GossipInterval, p.GossipNodes, n)
	probing := 3 * p.ProbeInterval
	return probing + minSusp + gossip, probing + maxSusp + gossip
}

// spreadTime is how long a broadcast takes to reach n members gossiping
// every interval to fanout peers: log_fanout(n)+2 rounds.
func spreadTime(interval time.Duration, fanout, n int) time.Duration {
	f := math.Max(2, float64(fanout))
	rounds := math.Ceil(math.Log(float64(max(n, 1)))/math.Log(f)) + 2
	return time.Duration(rounds * float64(interval))
}
