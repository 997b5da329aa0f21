// Package membership is the gossip failure detector among the agents of one
// job. It wraps hashicorp/memberlist (SWIM with the Lifeguard extensions):
// every agent joins one encrypted memberlist cluster under its agent name,
// advertises its boot incarnation and role as node metadata, and turns what
// memberlist learns about its peers into Evidence — alive, suspect, dead or
// left — on a channel.
//
// Evidence is reported, never acted on: an agent forwards it to the root, and
// the root's Raft leader de-duplicates it by (node, incarnation) and decides.
// Nothing in this package kills, restarts or re-routes anything.
//
// ClusterProfile is the tuned timing profile for a job's agents (derived from
// memberlist's LAN profile); TestProfile tightens it further for tests. Bounds
// computes the detection time a profile promises for a cluster size.
//
// Network and MemTransport are an in-memory, lossy memberlist transport for
// tests, where a crashed peer drops traffic instead of blocking its senders,
// with crash, partition, heal and seeded loss.
//
// Threading: a Member is safe for concurrent use. Each Member owns two
// goroutines (an evidence dispatcher and a suspicion poller) besides those of
// memberlist itself; Shutdown stops them and waits for them to exit.
package membership
