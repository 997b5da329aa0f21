package raftstore

import (
	"testing"
	"time"
)

// Leaderless is 0 while a replica knows a leader, and counts from when
// it lost it: a group of two whose other voter is cut off has none.
func TestLeaderless(t *testing.T) {
	g := newGroup(t, 2, nil)
	l := g.leader(10*time.Second, nil)
	for _, r := range g.replicas {
		waitFor(t, 5*time.Second, "a known leader", func() bool { return r.Leaderless() == 0 })
	}
	g.isolate(1 - l)
	r := g.replicas[l]
	waitFor(t, 5*time.Second, "the leader to step down", func() bool { return !r.IsLeader() })
	waitFor(t, 5*time.Second, "no leader known", func() bool { return r.Leaderless() > 0 })
	first := r.Leaderless()
	waitFor(t, 5*time.Second, "the leaderless time to grow", func() bool { return r.Leaderless() > first+100*time.Millisecond })
}
