package plan_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// TestSimulateEqualsModel: constant REM and one lane reproduce the model
// exactly, with and without batching, for every kind.
func TestSimulateEqualsModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ctx := context.Background()
	sizes := []int{1, 2, 3, 100}
	for range 5 {
		sizes = append(sizes, 1+rng.IntN(4000))
	}
	for _, n := range sizes {
		for _, k := range allKinds() {
			m := plan.Model{Seq: rng.Float64() * 0.05, Rem: rng.Float64() * 0.3}
			if rng.IntN(2) == 0 {
				m.Batch, m.BatchWait = 1+rng.IntN(8), rng.Float64()*0.2
			}
			pl := mustBuild(t, k, n, plan.Params{Seq: m.Seq, Rem: m.Rem})
			want, err := pl.ModelTime(m)
			if err != nil {
				t.Fatal(err)
			}
			res, err := plan.Simulate(ctx, pl, plan.SimConfig{
				Seq: m.Seq, Rem: plan.RemDist{Const: m.Rem}, Batch: m.Batch, BatchWait: m.BatchWait,
				Runs: 3, Seed: rng.Uint64(),
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range res.Times {
				if got != want {
					t.Fatalf("%s n=%d %+v: simulated %v, model %v", k, n, m, got, want)
				}
			}
			if res.Median != want || res.P99 != want || res.Min != want || res.Max != want {
				t.Fatalf("%s n=%d: summary %+v, model %v", k, n, res, want)
			}
		}
	}
}

// TestSimulateSampledBounds: the launch time only grows with each REM, so
// every run lies between the model at the smallest and the largest sample.
func TestSimulateSampledBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	samples := []float64{0.03, 0.034, 0.05, 0.2, 0.031}
	for _, k := range allKinds() {
		n := 2 + rng.IntN(3000)
		for _, batch := range []int{0, 4} {
			m := plan.Model{Seq: 0.02, Batch: batch}
			if batch > 0 {
				m.BatchWait = 0.1
			}
			pl := mustBuild(t, k, n, plan.Params{Seq: 0.02, Rem: 0.04})
			lo, hi := m, m
			lo.Rem, hi.Rem = slices.Min(samples), slices.Max(samples)
			tlo, _ := pl.ModelTime(lo)
			thi, _ := pl.ModelTime(hi)
			res, err := plan.Simulate(context.Background(), pl, plan.SimConfig{
				Seq: m.Seq, Rem: plan.RemDist{Samples: samples}, Batch: m.Batch, BatchWait: m.BatchWait, Runs: 50, Seed: 42,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range res.Times {
				if x < tlo || x > thi {
					t.Fatalf("%s n=%d batch %d: run time %v outside [%v, %v]", k, n, batch, x, tlo, thi)
				}
			}
			// Summary statistics agree with the per-run times.
			s := slices.Sorted(slices.Values(res.Times))
			if res.Median != (s[24]+s[25])/2 || res.P99 != s[49] || res.Min != s[0] || res.Max != s[49] {
				t.Fatalf("summary %+v does not match sorted times %v", res, s)
			}
			again, _ := plan.Simulate(context.Background(), pl, plan.SimConfig{
				Seq: m.Seq, Rem: plan.RemDist{Samples: samples}, Batch: m.Batch, BatchWait: m.BatchWait, Runs: 50, Seed: 42,
			})
			if !slices.Equal(again.Times, res.Times) {
				t.Fatalf("%s: same seed, different runs", k)
			}
		}
	}
}

func TestSimulatePercentiles(t *testing.T) {
	pl := mustBuild(t, plan.Kind{Shape: plan.Flat}, 2, plan.Params{})
	// One launch per run: the run time is the REM drawn.
	samples := make([]float64, 1000)
	for i := range samples {
		samples[i] = float64(i) / 1000
	}
	res, err := plan.Simulate(context.Background(), pl, plan.SimConfig{Rem: plan.RemDist{Samples: samples}, Runs: 101, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := slices.Sorted(slices.Values(res.Times))
	if res.Median != s[50] || res.P99 != s[99] || res.Runs != 101 {
		t.Fatalf("median %v p99 %v, want %v %v", res.Median, res.P99, s[50], s[99])
	}
	if res.Min == res.Max {
		t.Fatalf("101 draws from 1000 values all equal %v", res.Min)
	}
	other, _ := plan.Simulate(context.Background(), pl, plan.SimConfig{Rem: plan.RemDist{Samples: samples}, Runs: 101, Seed: 2})
	if slices.Equal(other.Times, res.Times) {
		t.Fatalf("seeds 1 and 2 gave the same runs")
	}
}

// TestSimulateConcurrency: more lanes never slow a launch down, and with
// as many lanes as children a flat tree is up after one REM.
func TestSimulateConcurrency(t *testing.T) {
	ctx := context.Background()
	for _, k := range allKinds() {
		pl := mustBuild(t, k, 777, plan.Params{Seq: 0.035, Rem: 0.034})
		prev := 0.0
		for i, c := range []int{1, 2, 4, 8, 1000} {
			res, err := plan.Simulate(ctx, pl, plan.SimConfig{Seq: 0.035, Rem: plan.RemDist{Const: 0.034}, Concurrency: c, Runs: 1})
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && res.Median > prev {
				t.Fatalf("%s: concurrency %d slower (%v) than fewer lanes (%v)", k, c, res.Median, prev)
			}
			prev = res.Median
			if c == 1000 {
				// With a lane per child every level costs exactly one REM.
				want := 0.0
				for range pl.Depth() {
					want += 0.034
				}
				if res.Median != want {
					t.Fatalf("%s: unbounded lanes %v, want depth*rem %v", k, res.Median, want)
				}
			}
		}
	}
}

func TestSimulateErrors(t *testing.T) {
	pl := mustBuild(t, plan.Kind{Shape: plan.Flat}, 10, plan.Params{})
	ctx := context.Background()
	for _, cfg := range []plan.SimConfig{
		{Runs: 0},
		{Runs: 1, Concurrency: -1},
		{Runs: 1, Seq: -1},
		{Runs: 1, Rem: plan.RemDist{Const: -1}},
		{Runs: 1, Rem: plan.RemDist{Samples: []float64{0.1, -0.1}}},
		{Runs: 1, Batch: -2},
	} {
		if _, err := plan.Simulate(ctx, pl, cfg); err == nil {
			t.Errorf("Simulate(%+v) accepted", cfg)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := plan.Simulate(cctx, pl, plan.SimConfig{Runs: 5}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Simulate returned %v", err)
	}
}

func TestRemSamplesFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rem.txt")
	if err := os.WriteFile(good, []byte("# measured\n0.034\n\n  0.05 \n1e-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := plan.LoadRemSamples(good)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Samples, []float64{0.034, 0.05, 0.01}) {
		t.Fatalf("samples %v", d.Samples)
	}
	for body, want := range map[string]string{
		"0.1\n0.2\nfast\n": "line 3",
		"0.1\n-0.5\n":      "line 2",
		"NaN\n":            "line 1",
		"# nothing\n\n":    "no samples",
	} {
		bad := filepath.Join(dir, "bad.txt")
		if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := plan.LoadRemSamples(bad)
		if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), want) {
			t.Errorf("samples %q: error %v, want it to name %s and %q", body, err, bad, want)
		}
	}
	if _, err := plan.LoadRemSamples(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("missing file accepted")
	}
}
