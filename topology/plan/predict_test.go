package plan

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPredictWithoutContention: without a shared CPU, and with one large
// enough never to be shared, the prediction is the model.
func TestPredictWithoutContention(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		n := 1 + r.IntN(300)
		seq, rem := r.Float64()*0.1, 0.01+r.Float64()*0.5
		for _, k := range []string{"auto", "kary:3", "binomial", "flat", "2level"} {
			pl := mustBuild(t, k, n, Params{Calibration: &Calibration{Seq: seq, Rem: rem}})
			want, err := pl.ModelTime(Model{Seq: seq, Rem: rem})
			if err != nil {
				t.Fatal(err)
			}
			for _, sh := range []Shared{{}, {Cores: n, Work: rem / 2}, {Cores: 2, Work: 0}} {
				got, err := pl.Predict(Forecast{Seq: seq, Rem: rem, Shared: sh})
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(got-want) > 1e-9 {
					t.Fatalf("case %d %s n=%d shared %+v: predicted %v, model %v", i, k, n, sh, got, want)
				}
			}
		}
	}
}

// TestPredictSharedCPU: launches that share the CPUs finish as a
// processor-sharing pool serves them.
func TestPredictSharedCPU(t *testing.T) {
	const w = 0.02
	// Flat, 16 children started together on one core, no latency beyond
	// the work: processor sharing ends them all at 16 w.
	pl := mustBuild(t, "flat", 17, Params{})
	got, err := pl.Predict(Forecast{Seq: 0, Rem: w, Shared: Shared{Cores: 1, Work: w}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-16*w) > 1e-9 {
		t.Errorf("flat over one core: %v, want %v", got, 16*w)
	}
	// Two cores halve it; a latency of 0.1 s beyond the work adds to it.
	got, _ = pl.Predict(Forecast{Seq: 0, Rem: w + 0.1, Shared: Shared{Cores: 2, Work: w}})
	if want := 8*w + 0.1; math.Abs(got-want) > 1e-9 {
		t.Errorf("flat over two cores: %v, want %v", got, want)
	}
	// A chain never shares: each launch is alone on the CPUs.
	chain := mustBuild(t, "kary:1", 6, Params{})
	got, _ = chain.Predict(Forecast{Seq: 0.001, Rem: 0.05, Shared: Shared{Cores: 1, Work: w}})
	if want := 5 * 0.05; math.Abs(got-want) > 1e-9 {
		t.Errorf("chain: %v, want %v", got, want)
	}
	// Sharing never speeds a launch up, and more work never helps.
	r := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		n := 2 + r.IntN(100)
		f := Forecast{Seq: r.Float64() * 0.02, Rem: 0.05 + r.Float64()*0.3}
		for _, k := range []string{"auto", "kary:4", "binomial", "flat"} {
			pl := mustBuild(t, k, n, Params{})
			base, _ := pl.Predict(f)
			prevT := base
			for _, work := range []float64{0.005, 0.02, 0.05} {
				f.Shared = Shared{Cores: 2, Work: work}
				got, err := pl.Predict(f)
				if err != nil {
					t.Fatal(err)
				}
				if got < prevT-1e-9 {
					t.Fatalf("%s n=%d work %v: %v faster than with less work (%v)", k, n, work, got, prevT)
				}
				prevT = got
			}
			f.Shared = Shared{}
		}
	}
}

// TestChooseAutoHysteresis: auto keeps its previous tree unless the new
// choice is faster by more than the calibration's noise. The forecasts
// are the two launches in a row (#33): the tree of the first
// calibration is 5 % slower under the second, which is noise.
func TestChooseAutoHysteresis(t *testing.T) {
	f := Forecast{Seq: 0.056, Rem: 0.483}
	best := Choice{Tree: "auto", Seq: 0.056, Rem: 0.483}
	for _, c := range []struct {
		name  string
		prev  *Choice
		noise float64
		want  Choice
		why   string
	}{
		{"first launch", nil, 0.1, best, ""},
		{"same tree", &best, 0.1, best, ""},
		{"within the noise", &Choice{Tree: "auto", Seq: 0.058, Rem: 0.336}, 0.10, Choice{Tree: "auto", Seq: 0.058, Rem: 0.336}, "kept"},
		{"beyond a smaller noise", &Choice{Tree: "auto", Seq: 0.058, Rem: 0.336}, 0.02, best, "changed"},
		{"far beyond the noise", &Choice{Tree: "auto", Seq: 0.035, Rem: 0.034}, 0.10, best, "changed"},
		{"a fixed kind kept", &Choice{Tree: "kary:4"}, 0.20, Choice{Tree: "kary:4"}, "kept"},
		{"a kind this build lacks", &Choice{Tree: "nope"}, 0.5, best, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChooseAuto(17, f, Params{Replicas: 1}, c.prev, c.noise)
			if err != nil {
				t.Fatal(err)
			}
			if got.Choice != c.want {
				t.Errorf("chose %v, want %v (%s)", got.Choice, c.want, got.Why)
			}
			if !strings.HasPrefix(got.Why, c.why) || (c.why == "") != (got.Why == "") {
				t.Errorf("why %q, want it to start with %q", got.Why, c.why)
			}
			want, _ := got.Plan.Predict(f)
			if got.Predicted != want || got.Plan.N() != 17 {
				t.Errorf("predicted %v for its plan of %d nodes, the plan's is %v", got.Predicted, got.Plan.N(), want)
			}
		})
	}
}

// TestChooseAutoSharedCPU: with a shared CPU auto takes the candidate
// with the least predicted time; without one, the greedy tree.
func TestChooseAutoSharedCPU(t *testing.T) {
	for _, n := range []int{9, 17, 33, 129} {
		f := Forecast{Seq: 0.002, Rem: 0.06, Shared: Shared{Cores: 2, Work: 0.03}}
		got, err := ChooseAuto(n, f, Params{}, nil, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range autoCandidates(f) {
			pl, err := c.build(n, Params{})
			if err != nil {
				t.Fatal(err)
			}
			if x, _ := pl.Predict(f); x < got.Predicted {
				t.Errorf("n=%d: chose %v (%v s), but %v predicts %v s", n, got.Choice, got.Predicted, c, x)
			}
		}
		f.Shared = Shared{}
		plain, err := ChooseAuto(n, f, Params{}, nil, 0.1)
		if err != nil {
			t.Fatal(err)
		}
		if plain.Choice != (Choice{Tree: "auto", Seq: f.Seq, Rem: f.Rem}) {
			t.Errorf("n=%d without contention: chose %v, want greedy", n, plain.Choice)
		}
	}
}

func mustBuild(t *testing.T, kind string, n int, p Params) *Plan {
	t.Helper()
	k, err := ParseKind(kind)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := Build(k, n, p)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// TestPredictHandoff: every node but the root starts its children the
// handoff after it is up, with or without a shared CPU; auto weighs the
// greedy tree shaped by REM + handoff.
func TestPredictHandoff(t *testing.T) {
	chain := mustBuild(t, "kary:1", 6, Params{})
	got, err := chain.Predict(Forecast{Seq: 0.01, Rem: 0.05, Hand: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if want := 5*0.05 + 4*0.2; math.Abs(got-want) > 1e-9 {
		t.Errorf("chain: %v, want %v", got, want)
	}
	got, _ = chain.Predict(Forecast{Seq: 0.01, Rem: 0.05, Hand: 0.2, Shared: Shared{Cores: 1, Work: 0.02}})
	if want := 5*0.05 + 4*0.2; math.Abs(got-want) > 1e-9 {
		t.Errorf("chain with a shared CPU: %v, want %v", got, want)
	}
	flat := mustBuild(t, "flat", 9, Params{})
	got, _ = flat.Predict(Forecast{Seq: 0.01, Rem: 0.05, Hand: 5})
	if want := 7*0.01 + 0.05; math.Abs(got-want) > 1e-9 {
		t.Errorf("flat (no handoff below the root): %v, want %v", got, want)
	}
	f := Forecast{Seq: 0.01, Rem: 0.1, Hand: 0.3}
	ch, err := ChooseAuto(33, f, Params{}, nil, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := ChooseAuto(33, Forecast{Seq: 0.01, Rem: 0.1}, Params{}, nil, 0.1)
	if tp, _ := plain.Plan.Predict(f); ch.Predicted > tp || ch.Plan.Depth() > plain.Plan.Depth() {
		t.Errorf("with a handoff auto chose %v (%v s, depth %d); the plain greedy tree predicts %v s (depth %d)", ch.Choice, ch.Predicted, ch.Plan.Depth(), tp, plain.Plan.Depth())
	}
	if _, err := Simulate(context.Background(), chain, SimConfig{Rem: RemDist{Const: 1}, Hand: -1, Runs: 1}); err == nil {
		t.Error("a negative handoff was simulated")
	}
}

// TestPredictWorkAfter: an agent's work after it is up slows the launches
// it shares the CPUs with, and waits for nothing itself.
func TestPredictWorkAfter(t *testing.T) {
	const w = 0.02
	chain := mustBuild(t, "kary:1", 3, Params{})
	got, _ := chain.Predict(Forecast{Rem: w, Shared: Shared{Cores: 1, Work: w, After: 0.05}})
	if want := 3 * w; math.Abs(got-want) > 1e-9 { // node 2's launch shares the core with node 1's after-work
		t.Errorf("chain: %v, want %v", got, want)
	}
	flat := mustBuild(t, "flat", 3, Params{})
	got, _ = flat.Predict(Forecast{Rem: w, Shared: Shared{Cores: 1, Work: w, After: 5}})
	if want := 2 * w; math.Abs(got-want) > 1e-9 {
		t.Errorf("flat: %v, want %v (the agents' later work waits for nothing)", got, want)
	}
}
