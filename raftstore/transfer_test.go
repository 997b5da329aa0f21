package raftstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestTransferLeadership: a transfer to a named follower makes it lead; one
// to a follower cut off fails within its context instead of waiting on
// raft's future, and the replica still shuts down (its goroutines joined).
func TestTransferLeadership(t *testing.T) {
	g := newGroup(t, 3, nil)
	l := g.leader(10*time.Second, nil)
	to := (l + 1) % 3
	ctx := context.Background()
	id, addr := raft.ServerID(g.replicas[to].cfg.Name), g.trans[to].LocalAddr()
	// raft gives a transfer an election timeout (275 ms): on a loaded
	// machine it may time out, and is asked again.
	waitFor(t, 20*time.Second, "the lead to move to "+string(id), func() bool {
		if err := g.replicas[l].TransferLeadership(ctx, id, addr); err != nil {
			t.Logf("transfer to %s: %v", id, err)
		}
		l = g.leader(10*time.Second, nil)
		return l == to
	})
	// A follower cut off: the transfer cannot complete.
	other := (to + 1) % 3
	g.isolate(other)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	began := time.Now()
	err := g.replicas[to].TransferLeadership(tctx, raft.ServerID(g.replicas[other].cfg.Name), g.trans[other].LocalAddr())
	if err == nil {
		t.Fatalf("transfer to an isolated follower succeeded")
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the failed transfer took %v", took)
	}
	t.Logf("transfer to an isolated follower: %v", err)
	if err := g.replicas[to].Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := g.replicas[to].TransferLeadership(ctx, id, addr); !errors.Is(err, ErrShutdown) {
		t.Errorf("transfer after shutdown: %v, want ErrShutdown", err)
	}
}
