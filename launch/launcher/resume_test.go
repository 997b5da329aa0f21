package launcher

import (
	"context"
	"encoding/json"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/raftstore"
	"github.com/ftlaunch/ftlaunch/recovery"
)

// TestTakeover: what a successor root takes over from the replicated
// state: the job's record, its agents and their tree, the agents hosting
// replicas (its peers'), the job's CA, where it takes control connections
// (its own agent's recorded listener) and the epoch its collectives count
// under (the last recovery checkpoint's); a broken CA or no plan refuse.
func TestTakeover(t *testing.T) {
	start := time.Unix(1700000000, 0).UTC()
	rec, err := json.Marshal(journal.Job{ID: "j", N: 2, Argv: []string{"app"}, Start: start, Restart: "rank"})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := secure.NewJobCA("j")
	if err != nil {
		t.Fatal(err)
	}
	cp := (recovery.Checkpoint{Epoch: 3, Stage: recovery.StageResume, Version: 2}).Record()
	state := func() *raftstore.State {
		return &raftstore.State{
			Job:    raftstore.JobSpec{ID: "j", Size: 2, Spec: rec},
			Plan:   raftstore.Plan{Nodes: []raftstore.PlanNode{{Name: journal.RootName}, {Name: "n0"}, {Name: "n1", Primary: "n0", Backup: journal.RootName}}},
			Agents: map[string]raftstore.Agent{"n0": {Node: "n0", Addr: "10.0.0.1:7"}, "n1": {Node: "n1"}},
			Ranks:  []raftstore.Rank{{Rank: 0, Node: "n0"}, {Rank: 1, Node: "n1"}},
		}
	}
	for _, tc := range []struct {
		name      string
		node      string // the replica agent's
		ca        []byte
		recovered bool
		peers     []proto.PeerAddr
		control   []string
		epoch     uint64
	}{
		{"on n0, with the job's CA, after a recovery", "n0", ca.Marshal(), true, []proto.PeerAddr{{Idx: 0}, {Idx: 1}}, []string{"10.0.0.1:7"}, 3},
		{"on n1, whose address is not recorded, no CA", "n1", nil, false, []proto.PeerAddr{{Idx: 1}}, nil, 0},
	} {
		st := state()
		if tc.recovered {
			st.Recovery = &cp
		}
		spec := &proto.NodeSpec{Node: tc.node, Replica: proto.ReplicaSpec{CA: tc.ca}}
		tk, err := TakeoverOf(st, spec, tc.peers)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		replicas := map[int]bool{}
		for _, p := range tc.peers {
			replicas[p.Idx] = true
		}
		switch {
		case tk.State != st || tk.Job.ID != "j" || !tk.Job.Start.Equal(start) || tk.Job.Restart != "rank":
			t.Errorf("%s: job %+v", tc.name, tk.Job)
		case len(tk.Resumed.Agents) != 2 || tk.Tree.Parent(1) != 0 || tk.Tree.Backup(0) >= 0:
			t.Errorf("%s: agents %+v", tc.name, tk.Resumed.Agents)
		case !reflect.DeepEqual(tk.Replicas, replicas):
			t.Errorf("%s: replicas %v, want %v", tc.name, tk.Replicas, replicas)
		case (tk.CA != nil) != (tc.ca != nil):
			t.Errorf("%s: CA %v", tc.name, tk.CA)
		case !reflect.DeepEqual(tk.Control, tc.control):
			t.Errorf("%s: control addresses %v, want %v", tc.name, tk.Control, tc.control)
		case tk.CollEpoch != tc.epoch:
			t.Errorf("%s: collectives' epoch %d, want %d", tc.name, tk.CollEpoch, tc.epoch)
		}
	}
	if _, err := TakeoverOf(state(), &proto.NodeSpec{Node: "n0", Replica: proto.ReplicaSpec{CA: []byte("x")}}, nil); err == nil {
		t.Error("a broken CA: no error")
	}
	st := state()
	st.Plan = raftstore.Plan{}
	if _, err := TakeoverOf(st, &proto.NodeSpec{Node: "n0"}, nil); err == nil {
		t.Error("no plan: no error")
	}
}

// TestProbeGone: a successor learns at once that a replica peer's agent
// is gone when its address refuses connections; a peer that listens, or
// one the planner did not name, is left to the adoption's bound.
func TestProbeGone(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed.Close() // nothing listens there any more: refused
	peers := []proto.PeerAddr{{Idx: 1, Addr: up.Addr().String()}, {Idx: 2, Addr: closed.Addr().String()}, {Idx: 3, Addr: closed.Addr().String()}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var gone []int
	ProbeGone(context.Background(), peers, []int{1, 2}, func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}, func(idx int, why error) {
		mu.Lock()
		defer mu.Unlock()
		gone = append(gone, idx)
	})
	wg.Wait()
	if !reflect.DeepEqual(gone, []int{2}) {
		t.Fatalf("gone %v, want [2]", gone)
	}
}
