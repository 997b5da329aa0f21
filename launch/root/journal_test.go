package root

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The front-end adds two replica agents to its group and dies at once,
// while the first one has not heard of the second yet (cut off from the
// front-end while the second joins). The two left must elect a leader: a
// second replica committed as a voter without the first would leave the
// first in a group of two voters, the dead front-end and itself, refusing
// the second's votes (found by TestRootFailoverDuringLaunch, 1 run in 10).
func TestJoinGroupSurvivesFrontend(t *testing.T) {
	dir := t.TempDir()
	names := []string{"vm", "node1", "node0"}
	trans := make([]*raft.InmemTransport, len(names))
	for i, n := range names {
		_, trans[i] = raft.NewInmemTransport(raft.ServerAddress(n))
	}
	connect := func(i, j int) {
		trans[i].Connect(trans[j].LocalAddr(), trans[j])
		trans[j].Connect(trans[i].LocalAddr(), trans[i])
	}
	connect(0, 1)
	connect(0, 2)
	connect(1, 2)
	// Timers long enough that the front-end keeps its lease while the
	// first replica agent is cut off from it.
	timing := raftstore.Timing{HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second, CommitTimeout: 10 * time.Millisecond}
	rs := make([]*raftstore.Replica, len(names))
	for i, n := range names {
		cfg := raftstore.Config{StateDir: dir, Name: n, Transport: trans[i], Timing: timing}
		if i == 0 {
			cfg.Peers = []raft.Server{{Suffrage: raft.Voter, ID: "vm", Address: trans[0].LocalAddr()}}
		}
		r, err := raftstore.Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = r
	}
	t.Cleanup(func() {
		for i, r := range rs {
			_ = r.Shutdown()
			_ = trans[i].Close()
		}
	})
	fe := rs[0].Raft()
	waitLeader := func(i int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !rs[i].IsLeader() {
			if time.Now().After(deadline) {
				t.Fatalf("%s does not lead", names[i])
			}
			time.Sleep(10 * time.Millisecond) // polling raft's state
		}
	}
	waitLeader(0)
	if err := joinGroup(fe, "node1", trans[1].LocalAddr(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// node1 has the configuration it is a voter in (its commit did not
	// wait for it: the front-end was the only voter).
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := rs[1].Raft().GetConfiguration()
		if f.Error() == nil && slices.ContainsFunc(f.Configuration().Servers, func(s raft.Server) bool { return s.ID == "node1" && s.Suffrage == raft.Voter }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("node1 did not get the configuration that has it")
		}
		time.Sleep(10 * time.Millisecond) // polling raft's state
	}
	// node1 hears nothing from the front-end for a while, node0 joins.
	trans[0].Disconnect(trans[1].LocalAddr())
	trans[1].Disconnect(trans[0].LocalAddr())
	heal := time.AfterFunc(300*time.Millisecond, func() { connect(0, 1) })
	defer heal.Stop()
	if err := joinGroup(fe, "node0", trans[2].LocalAddr(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	// The front-end dies as soon as node0 joined.
	trans[0].DisconnectAll()
	trans[1].Disconnect(trans[0].LocalAddr())
	trans[2].Disconnect(trans[0].LocalAddr())
	heal.Stop()
	_ = rs[0].Shutdown()
	deadline = time.Now().Add(10 * time.Second)
	for !rs[1].IsLeader() && !rs[2].IsLeader() {
		if time.Now().After(deadline) {
			for i := 1; i < 3; i++ {
				f := rs[i].Raft().GetConfiguration()
				t.Logf("%s: %v, configuration %+v", names[i], rs[i].Raft().State(), f.Configuration().Servers)
			}
			t.Fatal("no leader among the replica agents 10 s after the front-end died")
		}
		time.Sleep(10 * time.Millisecond) // polling raft's state
	}
}
