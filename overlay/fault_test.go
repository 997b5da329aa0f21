package overlay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay"
)

// TestDuplicatesAndStaleEpochs replays every message of finished and
// running collectives: nothing is answered twice, and messages of an older
// epoch are dropped.
func TestDuplicatesAndStaleEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 7))
		tr := tree{karyTree(40, 3), blockMembers(40, 3, false, rng)}
		tr.members[0] = []int{1000} // the root hosts one member
		log := &msgLog{}
		c := startCluster(t, tr, overlay.MemConfig{}, log)
		all := tr.allMembers()
		ctx := t.Context()

		id := overlay.CollID{Epoch: 0, Seq: 0}
		val := memberValue("a")
		if err := c.engs[0].Contribute(id, overlay.OpAllgather, 1000, val(1000)); err != nil {
			t.Fatal(err)
		}
		if err := c.engs[0].Contribute(id, overlay.OpAllgather, 1000, []byte("other")); !errors.Is(err, overlay.ErrDuplicate) {
			t.Fatalf("second contribution: %v", err)
		}
		if err := c.engs[0].Contribute(id, overlay.OpBarrier, 1000, nil); !errors.Is(err, overlay.ErrOpMismatch) {
			t.Fatalf("same id, other op: %v", err)
		}
		c.contribute(t, id, overlay.OpAllgather, val, map[int]bool{1000: true})
		res, err := c.res.wait(ctx, id, len(all))
		if err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, val)
		if err := c.engs[0].Contribute(id, overlay.OpAllgather, 1000, val(1000)); !errors.Is(err, overlay.ErrFinished) {
			t.Fatalf("contribution to a finished collective: %v", err)
		}

		// Replay everything: every message is a duplicate of a finished
		// collective.
		msgs := log.all()
		before := c.stats()
		for _, m := range msgs {
			if err := c.engs[m.to].Handle(m.from, bytes.Clone(m.data)); err != nil {
				t.Fatalf("replay %d->%d: %v", m.from, m.to, err)
			}
		}
		synctest.Wait()
		after := c.stats()
		if got := after.Duplicates - before.Duplicates; got != uint64(len(msgs)) {
			t.Fatalf("%d duplicates counted for %d replayed messages", got, len(msgs))
		}
		if c.res.duplicates() != 0 || c.res.count(id) != len(all) {
			t.Fatalf("replay re-answered: %d twice, %d results", c.res.duplicates(), c.res.count(id))
		}

		// A duplicate up message while the collective is still open is
		// ignored: hold the root's member back, replay what reached the
		// root, then let the root's member in.
		id = overlay.CollID{Epoch: 0, Seq: 1}
		val = memberValue("b")
		c.contribute(t, id, overlay.OpAllgather, val, map[int]bool{1000: true})
		synctest.Wait()
		ups := 0
		for _, m := range log.all()[len(msgs):] {
			if m.to == 0 {
				ups++
				if err := c.engs[0].Handle(m.from, bytes.Clone(m.data)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ups != len(c.tr.topologies()[0].Children) {
			t.Fatalf("%d up messages reached the root", ups)
		}
		if err := c.engs[0].Contribute(id, overlay.OpAllgather, 1000, val(1000)); err != nil {
			t.Fatal(err)
		}
		res, err = c.res.wait(ctx, id, len(all))
		if err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, val)

		// After a new epoch, everything recorded is stale.
		c.setEpoch(t, 1)
		before = c.stats()
		for _, m := range log.all() {
			if err := c.engs[m.to].Handle(m.from, bytes.Clone(m.data)); err != nil {
				t.Fatal(err)
			}
		}
		if got := c.stats().Stale - before.Stale; got != uint64(len(log.all())) {
			t.Fatalf("%d stale messages counted, want %d", got, len(log.all()))
		}
		if err := c.engs[0].Contribute(overlay.CollID{Epoch: 0, Seq: 5}, overlay.OpBarrier, 1000, nil); !errors.Is(err, overlay.ErrStaleEpoch) {
			t.Fatalf("stale contribution: %v", err)
		}
		if err := c.engs[0].Contribute(overlay.CollID{Epoch: 2, Seq: 0}, overlay.OpBarrier, 1000, nil); !errors.Is(err, overlay.ErrFutureEpoch) {
			t.Fatalf("future contribution: %v", err)
		}
		if err := c.engs[0].SetEpoch(0); !errors.Is(err, overlay.ErrStaleEpoch) {
			t.Fatalf("moving back an epoch: %v", err)
		}
		// Sequence numbers start again in the new epoch.
		runAll(t, c, 1)
	})
}

// TestEpochAbortAndRestart leaves one member out of an allgather and a
// fence, moves to a new epoch, and restarts them: contributors get
// ErrAborted, puts that travelled with the aborted fence are not lost, and
// messages of the new epoch that reach a node before it moved are kept.
func TestEpochAbortAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 3))
		tr := tree{karyTree(1024, 4), blockMembers(1024, 3, true, rng)}
		c := startCluster(t, tr, overlay.MemConfig{}, nil)
		ctx := t.Context()
		all := tr.allMembers()
		missing := all[len(all)/3]

		id := overlay.CollID{Epoch: 0, Seq: 0}
		c.contribute(t, id, overlay.OpAllgather, memberValue("x"), map[int]bool{missing: true})
		for i, ms := range tr.members {
			for _, m := range ms {
				if err := c.engs[i].Put(fmt.Sprintf("k%d", m), []byte("old")); err != nil {
					t.Fatal(err)
				}
				if err := c.engs[i].Put(fmt.Sprintf("k%d", m), memberValue("kv")(m)); err != nil {
					t.Fatal(err)
				}
			}
		}
		fid := overlay.CollID{Epoch: 0, Seq: 1}
		c.contribute(t, fid, overlay.OpFence, nil, map[int]bool{missing: true})
		synctest.Wait()
		if c.res.count(id) != 0 || c.res.count(fid) != 0 {
			t.Fatalf("collectives with a member missing completed")
		}

		c.setEpoch(t, 1)
		for _, cid := range []overlay.CollID{id, fid} {
			res, err := c.res.wait(ctx, cid, len(all)-1)
			if err != nil {
				t.Fatal(err)
			}
			for m, r := range res {
				if !errors.Is(r.Err, overlay.ErrAborted) || m == missing {
					t.Fatalf("member %d of %v: %+v", m, cid, r)
				}
			}
		}

		// Epoch 2 reaches the leaves first: their contributions wait at
		// interior nodes still at epoch 1 and are handled once those move.
		for i := len(c.engs) - 1; i >= 1; i-- {
			if i > len(c.engs)/2 {
				if err := c.engs[i].SetEpoch(2); err != nil {
					t.Fatal(err)
				}
			}
		}
		id = overlay.CollID{Epoch: 2, Seq: 0}
		val := memberValue("y")
		for i, ms := range tr.members {
			if i > len(c.engs)/2 {
				for _, m := range ms {
					if err := c.engs[i].Contribute(id, overlay.OpAllgather, m, val(m)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		synctest.Wait()
		if d := c.stats().Deferred; d == 0 {
			t.Fatalf("no message was deferred")
		}
		for i := len(c.engs) / 2; i >= 0; i-- {
			if err := c.engs[i].SetEpoch(2); err != nil {
				t.Fatal(err)
			}
		}
		for i, ms := range tr.members {
			if i <= len(c.engs)/2 {
				for _, m := range ms {
					if err := c.engs[i].Contribute(id, overlay.OpAllgather, m, val(m)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		res, err := c.res.wait(ctx, id, len(all))
		if err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, val)

		fid = overlay.CollID{Epoch: 2, Seq: 1}
		c.contribute(t, fid, overlay.OpFence, nil, nil)
		if _, err := c.res.wait(ctx, fid, len(all)); err != nil {
			t.Fatal(err)
		}
		for i, e := range c.engs {
			if len(tr.members[i]) == 0 {
				continue
			}
			for _, m := range []int{all[0], missing, all[len(all)-1]} {
				v, err := e.Get(fmt.Sprintf("k%d", m))
				if err != nil || !bytes.Equal(v, memberValue("kv")(m)) {
					t.Fatalf("node %d: k%d = %q, %v", i, m, v, err)
				}
			}
		}
	})
}

// TestCrashedNodeTimesOut crashes an interior node: the collective cannot
// complete, the callers' deadline ends the wait, the engines stay
// responsive, and after the tree is repaired and the epoch moves on the
// collective restarts and completes.
func TestCrashedNodeTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 5))
		tr := tree{karyTree(1024, 4), blockMembers(1024, 4, false, rng)}
		c := startCluster(t, tr, overlay.MemConfig{}, nil)
		const dead = 5 // an interior node: children 21..24
		c.net.Crash(dead)

		id := overlay.CollID{Epoch: 0, Seq: 0}
		all := tr.allMembers()
		c.contribute(t, id, overlay.OpAllgather, memberValue("c"), nil)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		start := time.Now()
		_, err := c.res.wait(ctx, id, len(all))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("wait with a crashed node: %v", err)
		}
		if time.Since(start) != 30*time.Second {
			t.Fatalf("wait ended after %v", time.Since(start))
		}
		if c.res.count(id) != 0 {
			t.Fatalf("%d results with a crashed node", c.res.count(id))
		}

		// Repair: the dead node's children move to its parent, its members
		// are respawned there too; then the epoch moves on.
		c.setEpoch(t, 1)
		if r, err := c.res.wait(t.Context(), id, len(all)); err != nil || !errors.Is(r[all[0]].Err, overlay.ErrAborted) {
			t.Fatalf("abort after the crash: %v", err)
		}
		p := tr.parent[dead]
		for i := range tr.parent {
			if tr.parent[i] == dead {
				tr.parent[i] = p
			}
		}
		tr.members[p] = append(tr.members[p], tr.members[dead]...)
		tr.members[dead] = nil
		c.tr = tr
		ts := tr.topologies()
		var kids []overlay.Child
		for _, ch := range ts[p].Children {
			if ch.ID != dead {
				kids = append(kids, ch)
			}
		}
		ts[p].Children = kids
		for i, e := range c.engs {
			if i == dead {
				continue
			}
			if err := e.SetTopology(ts[i]); err != nil {
				t.Fatal(err)
			}
		}
		c.setEpoch(t, 2)
		id = overlay.CollID{Epoch: 2, Seq: 0}
		val := memberValue("after")
		c.contribute(t, id, overlay.OpAllgather, val, nil)
		res, err := c.res.wait(t.Context(), id, len(all))
		if err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, val)
	})
}

// TestLossAndDelay runs collectives concurrently over a network that
// delays and reorders messages, then over one that also loses messages:
// what completes is right, what does not complete ends with the deadline,
// and a restart in a new epoch on a healed network completes.
func TestLossAndDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 9))
		tr := tree{randomTree(1024, rng), scatteredMembers(1024, 2000, rng)}
		c := startCluster(t, tr, overlay.MemConfig{Seed: 11, MinDelay: time.Millisecond, MaxDelay: 40 * time.Millisecond}, nil)
		all := tr.allMembers()
		ag, ring, bar := overlay.CollID{Seq: 0}, overlay.CollID{Seq: 1}, overlay.CollID{Seq: 2}
		va, vr := memberValue("a"), memberValue("r")
		for i, ms := range tr.members {
			for _, m := range ms {
				for _, x := range []struct {
					id  overlay.CollID
					op  overlay.Op
					val []byte
				}{{bar, overlay.OpBarrier, nil}, {ring, overlay.OpRing, vr(m)}, {ag, overlay.OpAllgather, va(m)}} {
					if err := c.engs[i].Contribute(x.id, x.op, m, x.val); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		ctx := t.Context()
		res, err := c.res.wait(ctx, ag, len(all))
		if err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, va)
		if res, err = c.res.wait(ctx, ring, len(all)); err != nil {
			t.Fatal(err)
		}
		checkRing(t, res, all, vr)
		if _, err = c.res.wait(ctx, bar, len(all)); err != nil {
			t.Fatal(err)
		}

		// 5% loss: over a thousand nodes some message is lost.
		c.net.SetLoss(0.05)
		lossy := overlay.CollID{Seq: 3}
		c.contribute(t, lossy, overlay.OpAllgather, va, nil)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = c.res.wait(wctx, lossy, len(all))
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a lossy allgather: %v", err)
		}
		if c.net.Stats().Lost == 0 {
			t.Fatalf("nothing lost")
		}
		for _, r := range c.res.snapshot(lossy) {
			if r.Err != nil || len(r.Entries) != len(all) {
				t.Fatalf("a partial result was delivered")
			}
		}
		c.net.SetLoss(0)
		c.setEpoch(t, 1)
		id := overlay.CollID{Epoch: 1}
		c.contribute(t, id, overlay.OpAllgather, va, nil)
		if res, err = c.res.wait(ctx, id, len(all)); err != nil {
			t.Fatal(err)
		}
		checkAllgather(t, res, all, va)
	})
}

// TestHandleGarbage feeds random bytes and mutated real messages to
// engines: nothing panics, random garbage is rejected, and the cluster
// still computes right results afterwards.
func TestHandleGarbage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 13))
		tr := tree{karyTree(31, 2), blockMembers(31, 3, false, rng)}
		log := &msgLog{}
		c := startCluster(t, tr, overlay.MemConfig{}, log)
		runAll(t, c, 0)
		msgs := log.all()
		c.setEpoch(t, 1)

		rejected := 0
		for range 20000 {
			b := make([]byte, rng.IntN(64))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			node := rng.IntN(len(c.engs))
			before := c.engs[node].Stats()
			err := c.engs[node].Handle(rng.IntN(len(c.engs)), b)
			after := c.engs[node].Stats()
			if err == nil {
				// Only a message that parsed as one of another epoch or a
				// duplicate may be accepted silently.
				if after.Stale+after.Deferred+after.Duplicates == before.Stale+before.Deferred+before.Duplicates {
					t.Fatalf("garbage %x accepted by node %d", b, node)
				}
				continue
			}
			if !errors.Is(err, overlay.ErrProtocol) && !errors.Is(err, overlay.ErrTooManyOpen) {
				t.Fatalf("garbage: unexpected error %v", err)
			}
			rejected++
		}
		if rejected < 19000 {
			t.Fatalf("only %d of 20000 garbage messages rejected", rejected)
		}
		// Mutated real messages, rewritten to the current epoch.
		for range 20000 {
			m := msgs[rng.IntN(len(msgs))]
			b := bytes.Clone(m.data)
			b[2] = 1 // epoch 1 (one varint byte in these messages)
			switch rng.IntN(3) {
			case 0:
				b = b[:rng.IntN(len(b)+1)]
			case 1:
				b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
			case 2:
				b = append(b, byte(rng.Uint32()))
			}
			_ = c.engs[m.to].Handle(m.from, b)
		}
		// Start clean in a new epoch: the engines still work.
		c.setEpoch(t, 2)
		runAll(t, c, 2)
	})
}

func TestEngineConfigErrors(t *testing.T) {
	net := overlay.NewMemNetwork(overlay.MemConfig{})
	defer net.Close()
	ep, err := net.Endpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	bad := []overlay.Topology{
		{Parent: 1},
		{Parent: 0, Children: []overlay.Child{{ID: 0}}},
		{Parent: 0, Children: []overlay.Child{{ID: 2}, {ID: 2}}},
		{Parent: 0, Children: []overlay.Child{{ID: 2, Members: -1}}},
		{Parent: 0, Members: []int{3, 3}},
		{Parent: 0, Members: []int{-4}},
	}
	for _, tp := range bad {
		if _, err := overlay.NewEngine(overlay.Config{ID: 1, Topology: tp, Transport: ep}); err == nil {
			t.Errorf("topology %+v accepted", tp)
		}
	}
	if _, err := overlay.NewEngine(overlay.Config{ID: 1, Topology: overlay.Topology{Parent: 0}}); err == nil {
		t.Errorf("engine without a transport accepted")
	}
	e, err := overlay.NewEngine(overlay.Config{ID: 1, Topology: overlay.Topology{Parent: 0, Members: []int{4}}, Transport: ep})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Contribute(overlay.CollID{}, overlay.OpBarrier, 5, nil); !errors.Is(err, overlay.ErrNotMember) {
		t.Errorf("contribution of a foreign member: %v", err)
	}
	if err := e.Contribute(overlay.CollID{}, overlay.Op(99), 4, nil); err == nil {
		t.Errorf("unknown op accepted")
	}
	if err := e.Put("", nil); err == nil {
		t.Errorf("empty key accepted")
	}
	if err := e.Put("k", make([]byte, overlay.MaxValueLen+1)); err == nil {
		t.Errorf("huge value accepted")
	}
}
