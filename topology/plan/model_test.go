package plan_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// recursiveTime evaluates the model by recursion over Parent and Order
// only: launch(v) = launch(parent) + seq*(order-1) + rem. Batching is
// evaluated from the same two slices: leaf launchers are found by
// counting grandchildren.
func recursiveTime(parent, order []int32, m plan.Model) float64 {
	n := len(parent)
	kids := make([][]int32, n)
	for v := 1; v < n; v++ {
		p := parent[v]
		for int(order[v]) > len(kids[p]) {
			kids[p] = append(kids[p], -1)
		}
		kids[p][order[v]-1] = int32(v)
	}
	memo := make([]float64, n)
	done := make([]bool, n)
	var launch func(v int) float64
	launch = func(v int) float64 {
		if v == 0 {
			return 0
		}
		if done[v] {
			return memo[v]
		}
		p := int(parent[v])
		tp := launch(p)
		leafLauncher := true
		for _, c := range kids[p] {
			if len(kids[c]) > 0 {
				leafLauncher = false
			}
		}
		var t float64
		if m.Batch == 0 || !leafLauncher || len(kids[p]) <= m.Batch {
			t = tp + m.Seq*float64(order[v]-1) + m.Rem
		} else {
			// S_j, then the batch member's offset.
			j := int(order[v]-1) / m.Batch
			s := tp
			for b := 0; b < j; b++ {
				last := 0.0
				for q := 0; q < m.Batch; q++ {
					last = max(last, s+m.Seq*float64(q)+m.Rem)
				}
				s = last + m.BatchWait
			}
			t = s + m.Seq*float64(int(order[v]-1)%m.Batch) + m.Rem
		}
		memo[v], done[v] = t, true
		return t
	}
	worst := 0.0
	for v := range n {
		worst = max(worst, launch(v))
	}
	return worst
}

func TestModelMatchesRecursion(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 60 {
		n := 1 + rng.IntN(3000)
		m := plan.Model{Seq: rng.Float64() * 0.1, Rem: rng.Float64()}
		if rng.IntN(2) == 0 {
			m.Batch, m.BatchWait = 1+rng.IntN(10), rng.Float64()
		}
		for _, k := range allKinds() {
			pl := mustBuild(t, k, n, plan.Params{Seq: m.Seq, Rem: m.Rem})
			got, err := pl.ModelTime(m)
			if err != nil {
				t.Fatal(err)
			}
			if want := recursiveTime(pl.Parent, pl.Order, m); got != want {
				t.Fatalf("%s n=%d %+v: ModelTime %v, recursion %v", k, n, m, got, want)
			}
		}
	}
}

func TestModelBatchedByHand(t *testing.T) {
	// A root with 5 leaf children: batches {1,2}, {3,4}, {5}.
	pl := mustBuild(t, plan.Kind{Shape: plan.Flat}, 6, plan.Params{})
	times, err := pl.LaunchTimes(plan.Model{Seq: 1, Rem: 10, Batch: 2, BatchWait: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0, 10, 11, 26, 27, 42}
	for v := range want {
		if times[v] != want[v] {
			t.Fatalf("times %v, want %v", times, want)
		}
	}
	// Batching applies to leaf launchers only: in kary:2 over 7 nodes the
	// root launches launchers, nodes 1 and 2 launch leaves.
	pl = mustBuild(t, plan.Kind{Shape: plan.KAry, K: 2}, 7, plan.Params{})
	times, _ = pl.LaunchTimes(plan.Model{Seq: 1, Rem: 10, Batch: 1, BatchWait: 5})
	want = []float64{0, 10, 11, 20, 35, 21, 36}
	for v := range want {
		if times[v] != want[v] {
			t.Fatalf("kary:2 times %v, want %v", times, want)
		}
	}
	if !pl.IsLeafLauncher(1) || pl.IsLeafLauncher(0) || pl.IsLeafLauncher(3) {
		t.Fatalf("IsLeafLauncher wrong")
	}
}

func TestModelValidate(t *testing.T) {
	pl := mustBuild(t, plan.Kind{Shape: plan.Flat}, 3, plan.Params{})
	for _, m := range []plan.Model{{Seq: -1}, {Rem: math.Inf(1)}, {Batch: -1}, {Batch: 2, BatchWait: -1}, {BatchWait: 1}} {
		if _, err := pl.ModelTime(m); err == nil {
			t.Errorf("ModelTime(%+v) accepted", m)
		}
	}
}

// TestGreedyNeverWorse is Goehner's optimality: without batching no other
// kind beats greedy for the same {SEQ, REM}.
func TestGreedyNeverWorse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	others := []plan.Kind{{Shape: plan.TwoLevel}, {Shape: plan.Binomial}, {Shape: plan.Flat}}
	for _, k := range []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 48, 64} {
		others = append(others, plan.Kind{Shape: plan.KAry, K: k})
	}
	for i := range 120 {
		n := 1 + rng.IntN(2000)
		if i%30 == 0 && !testing.Short() {
			n = 1 + rng.IntN(100_000)
		}
		// Log-uniform parameters over six decades; sometimes zero.
		seq := math.Pow(10, -4+5*rng.Float64())
		rem := math.Pow(10, -4+5*rng.Float64())
		switch rng.IntN(10) {
		case 0:
			seq = 0
		case 1:
			rem = 0
		}
		m := plan.Model{Seq: seq, Rem: rem}
		g := mustBuild(t, plan.Kind{Shape: plan.Greedy}, n, plan.Params{Seq: seq, Rem: rem})
		gt, err := g.ModelTime(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range others {
			ot, err := mustBuild(t, k, n, plan.Params{}).ModelTime(m)
			if err != nil {
				t.Fatal(err)
			}
			if gt > ot*(1+1e-12) {
				t.Fatalf("n=%d seq=%g rem=%g: greedy %v > %s %v", n, seq, rem, gt, k, ot)
			}
		}
	}
}

// optimalTime is an independent oracle for integer SEQ and REM: the
// earliest t at which some tree has launched n nodes. f(t), the most nodes
// a root alone at time 0 can have up by t, is 1 + sum over its children
// i >= 1 with (i-1)*seq + rem <= t of f(t - (i-1)*seq - rem).
func optimalTime(n, seq, rem int) int {
	if n == 1 {
		return 0
	}
	if rem == 0 {
		return 0 // a chain, all up at time 0
	}
	if seq == 0 {
		return rem // everything launched at once
	}
	var f []int
	for t := 0; ; t++ {
		c := 1
		for s := t - rem; s >= 0 && c < n; s -= seq {
			c += f[s]
		}
		f = append(f, min(c, n))
		if f[t] >= n {
			return t
		}
	}
}

func TestGreedyMatchesOracle(t *testing.T) {
	for seq := 0; seq <= 6; seq++ {
		for rem := 0; rem <= 6; rem++ {
			if seq == 0 && rem == 0 {
				continue // the builder substitutes the defaults
			}
			for n := 1; n <= 300; n += 1 + n/20 {
				pl := mustBuild(t, plan.Kind{Shape: plan.Greedy}, n, plan.Params{Seq: float64(seq), Rem: float64(rem)})
				got, err := pl.ModelTime(plan.Model{Seq: float64(seq), Rem: float64(rem)})
				if err != nil {
					t.Fatal(err)
				}
				if want := optimalTime(n, seq, rem); got != float64(want) {
					t.Fatalf("seq=%d rem=%d n=%d: greedy %v, optimum %d", seq, rem, n, got, want)
				}
			}
		}
	}
}

func ExamplePlan_ModelTime() {
	k, _ := plan.ParseKind("greedy")
	pl, err := plan.Build(k, 1000, plan.Params{Seq: 0.007, Rem: 0.172})
	if err != nil {
		fmt.Println(err)
		return
	}
	t, _ := pl.ModelTime(plan.Model{Seq: 0.007, Rem: 0.172})
	fmt.Printf("depth %d, max fan-out %d, %.3f s\n", pl.Depth(), pl.MaxChildren(), t)
	// Output: depth 3, max fan-out 60, 0.589 s
}
