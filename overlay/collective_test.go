package overlay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay"
)

func checkAllgather(t *testing.T, res map[int]overlay.Result, all []int, val func(int) []byte) {
	t.Helper()
	checked := make(map[*overlay.Entry]bool) // the results of one node share their entries
	var want [][]byte
	for _, m := range all {
		r, ok := res[m]
		if !ok || r.Err != nil {
			t.Fatalf("allgather: member %d: result %v, err %v", m, ok, r.Err)
		}
		if len(r.Entries) != len(all) {
			t.Fatalf("allgather: member %d got %d entries, want %d", m, len(r.Entries), len(all))
		}
		if checked[&r.Entries[0]] {
			continue
		}
		checked[&r.Entries[0]] = true
		if want == nil {
			want = make([][]byte, len(all))
			for i, m := range all {
				want[i] = val(m)
			}
		}
		for i, e := range r.Entries {
			if e.Member != all[i] || !bytes.Equal(e.Data, want[i]) {
				t.Fatalf("allgather: member %d: entry %d is %d=%q, want %d=%q", m, i, e.Member, e.Data, all[i], want[i])
			}
		}
		if v, ok := r.Lookup(all[len(all)/2]); !ok || !bytes.Equal(v, val(all[len(all)/2])) {
			t.Fatalf("allgather: Lookup failed")
		}
	}
}

func checkRing(t *testing.T, res map[int]overlay.Result, all []int, val func(int) []byte) {
	t.Helper()
	n := len(all)
	for i, m := range all {
		r := res[m]
		if r.Err != nil {
			t.Fatalf("ring: member %d: %v", m, r.Err)
		}
		l, rt := all[(i-1+n)%n], all[(i+1)%n]
		if r.Left.Member != l || !bytes.Equal(r.Left.Data, val(l)) || r.Right.Member != rt || !bytes.Equal(r.Right.Data, val(rt)) || r.Size != n {
			t.Fatalf("ring: member %d got left %d=%q right %d=%q size %d; want %d, %d, %d",
				m, r.Left.Member, r.Left.Data, r.Right.Member, r.Right.Data, r.Size, l, rt, n)
		}
	}
}

// runAll runs every operation once at epoch, checking every member's result,
// and returns the per-node bytes received by each operation.
func runAll(t *testing.T, c *cluster, epoch uint64) map[overlay.Op][]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := c.tr.allMembers()
	n := len(all)
	traffic := make(map[overlay.Op][]uint64)
	snap := func() []uint64 {
		out := make([]uint64, len(c.engs))
		for i, e := range c.engs {
			out[i] = e.Stats().BytesRecv
		}
		return out
	}
	measure := func(op overlay.Op, before []uint64) {
		after := snap()
		for i := range after {
			after[i] -= before[i]
		}
		traffic[op] = after
	}
	seq := uint64(0)
	next := func() overlay.CollID { seq++; return overlay.CollID{Epoch: epoch, Seq: seq - 1} }

	// allgather
	id, val, before := next(), memberValue("ag"), snap()
	c.contribute(t, id, overlay.OpAllgather, val, nil)
	res, err := c.res.wait(ctx, id, n)
	if err != nil {
		t.Fatal(err)
	}
	checkAllgather(t, res, all, val)
	measure(overlay.OpAllgather, before)

	// gather: one node-level result at the root
	id, val = next(), memberValue("g")
	c.contribute(t, id, overlay.OpGather, val, nil)
	res, err = c.res.wait(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	g := res[overlay.NodeMember]
	if len(res) != 1 || len(g.Entries) != n {
		t.Fatalf("gather: %d results, %d entries", len(res), len(g.Entries))
	}
	for i, e := range g.Entries {
		if e.Member != all[i] || !bytes.Equal(e.Data, val(all[i])) {
			t.Fatalf("gather: entry %d wrong", i)
		}
	}

	// broadcast
	id = next()
	if err := c.engs[0].Contribute(id, overlay.OpBroadcast, 0, []byte("the value")); err != nil {
		t.Fatal(err)
	}
	if n > 0 && len(c.tr.members[1]) > 0 {
		if err := c.engs[1].Contribute(id, overlay.OpBroadcast, c.tr.members[1][0], []byte("x")); !errors.Is(err, overlay.ErrNotRoot) {
			t.Fatalf("broadcast from a non-root: %v", err)
		}
	}
	res, err = c.res.wait(ctx, id, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if string(res[m].Data) != "the value" {
			t.Fatalf("broadcast: member %d got %q", m, res[m].Data)
		}
	}

	// barrier: nobody is released before the last member enters
	id = next()
	c.contribute(t, id, overlay.OpBarrier, nil, map[int]bool{all[n/2]: true})
	if got := c.res.count(id); got != 0 {
		t.Fatalf("barrier released %d members early", got)
	}
	if err := c.engs[c.owner[all[n/2]]].Contribute(id, overlay.OpBarrier, all[n/2], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.res.wait(ctx, id, n); err != nil {
		t.Fatal(err)
	}

	// ring
	id, val, before = next(), memberValue("ring"), snap()
	c.contribute(t, id, overlay.OpRing, val, nil)
	res, err = c.res.wait(ctx, id, n)
	if err != nil {
		t.Fatal(err)
	}
	checkRing(t, res, all, val)
	measure(overlay.OpRing, before)

	// put + fence + get
	id, val = next(), memberValue("kv")
	for i, ms := range c.tr.members {
		for _, m := range ms {
			if err := c.engs[i].Put(fmt.Sprintf("key-%d-%d", epoch, m), val(m)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.engs[0].Get(fmt.Sprintf("key-%d-%d", epoch, all[0])); !errors.Is(err, overlay.ErrNotFound) {
		t.Fatalf("get before the fence: %v", err)
	}
	before = snap()
	c.contribute(t, id, overlay.OpFence, nil, nil)
	if _, err := c.res.wait(ctx, id, n); err != nil {
		t.Fatal(err)
	}
	measure(overlay.OpFence, before)
	rng := rand.New(rand.NewPCG(epoch, 1))
	for i, e := range c.engs {
		if len(c.tr.members[i]) == 0 {
			continue // a node without members is asked for nothing
		}
		for range 20 {
			m := all[rng.IntN(n)]
			v, err := e.Get(fmt.Sprintf("key-%d-%d", epoch, m))
			if err != nil || !bytes.Equal(v, val(m)) {
				t.Fatalf("node %d: get key-%d = %q, %v", i, m, v, err)
			}
		}
		if _, err := e.Get("no-such-key"); !errors.Is(err, overlay.ErrNotFound) {
			t.Fatalf("node %d: get of a missing key: %v", i, err)
		}
	}
	if d := c.res.duplicates(); d != 0 {
		t.Fatalf("%d results delivered twice", d)
	}
	return traffic
}

func TestCollectivesLargeTrees(t *testing.T) {
	cases := []struct {
		name  string
		build func(rng *rand.Rand) tree
		block bool // member ids contiguous per subtree level
	}{
		{"kary4-block-1024", func(rng *rand.Rand) tree {
			return tree{karyTree(1024, 4), blockMembers(1024, 7, true, rng)}
		}, true},
		{"kary16-block-1100", func(rng *rand.Rand) tree {
			return tree{karyTree(1100, 16), blockMembers(1100, 3, false, rng)}
		}, true},
		{"binary-block-1023", func(rng *rand.Rand) tree {
			return tree{karyTree(1023, 2), blockMembers(1023, 4, false, rng)}
		}, true},
		{"random-scattered-1200", func(rng *rand.Rand) tree {
			return tree{randomTree(1200, rng), scatteredMembers(1200, 3000, rng)}
		}, false},
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 42))
			c := startCluster(t, tc.build(rng), overlay.MemConfig{Seed: uint64(ci)}, nil)
			traffic := runAll(t, c, 0)
			if s := c.stats(); s.Rejected != 0 || s.SendErrors != 0 || s.Duplicates != 0 {
				t.Fatalf("unexpected counters: %+v", s)
			}
			if !tc.block {
				return
			}
			// The ring is a scan: no node receives much more than a few
			// ranges per child, while the allgather brings everything to
			// every node.
			var ringMax, agMin uint64 = 0, 1 << 62
			for i := range c.engs {
				ringMax = max(ringMax, traffic[overlay.OpRing][i])
				if len(c.tr.members[i]) > 0 {
					agMin = min(agMin, traffic[overlay.OpAllgather][i])
				}
			}
			if ringMax*10 > agMin {
				t.Fatalf("ring: a node received %d bytes, an allgather node only %d", ringMax, agMin)
			}
			t.Logf("bytes received per node: ring max %d, allgather min %d", ringMax, agMin)
		})
	}
}
