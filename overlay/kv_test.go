package overlay_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/ftlaunch/ftlaunch/overlay"
)

// TestFenceOverwritesAndConflicts runs many fences whose puts overwrite
// earlier keys (exercising the merging of stored lists): a get always sees
// the newest fenced value, puts of two nodes to one key resolve to the same
// value everywhere, and ResetKV forgets the board.
func TestFenceOverwritesAndConflicts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(21, 21))
		tr := tree{randomTree(60, rng), blockMembers(60, 3, false, rng)}
		c := startCluster(t, tr, overlay.MemConfig{}, nil)
		all := tr.allMembers()
		want := make(map[string]string)
		for f := range 20 {
			// Each fence writes a random subset of 200 keys, sizes vary so
			// that stored lists are merged in different patterns.
			n := 1 + rng.IntN(200)
			for range n {
				k := fmt.Sprintf("k%d", rng.IntN(200))
				v := fmt.Sprintf("v%d-%d", f, rng.IntN(1000))
				node := rng.IntN(len(c.engs))
				if err := c.engs[node].Put(k, []byte(v)); errors.Is(err, overlay.ErrNoMembers) {
					continue
				} else if err != nil {
					t.Fatal(err)
				}
				want[k] = "" // decided below from what the fence chose
			}
			id := overlay.CollID{Seq: uint64(f)}
			c.contribute(t, id, overlay.OpFence, nil, nil)
			if _, err := c.res.wait(t.Context(), id, len(all)); err != nil {
				t.Fatal(err)
			}
			// Every node with members agrees with the first such node.
			ref := -1
			for i := range c.engs {
				if len(tr.members[i]) > 0 {
					ref = i
					break
				}
			}
			for k, old := range want {
				v, err := c.engs[ref].Get(k)
				if err != nil {
					t.Fatalf("fence %d: %s: %v", f, k, err)
				}
				if old != "" && string(v) != old && !startsWith(string(v), fmt.Sprintf("v%d-", f)) {
					t.Fatalf("fence %d: %s = %s, neither the old %s nor this fence's", f, k, v, old)
				}
				want[k] = string(v)
				for i, e := range c.engs {
					if len(tr.members[i]) == 0 {
						continue
					}
					if got, err := e.Get(k); err != nil || string(got) != string(v) {
						t.Fatalf("fence %d: node %d: %s = %q, node %d has %q", f, i, k, got, ref, v)
					}
				}
			}
		}
		for _, e := range c.engs {
			e.ResetKV()
			if _, err := e.Get("k1"); !errors.Is(err, overlay.ErrNotFound) {
				t.Fatalf("after ResetKV: %v", err)
			}
		}
	})
}

func startsWith(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
