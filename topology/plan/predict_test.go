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

// TestShareRates: the CPUs shared max-min fairly among launches (capped
// at their cores), unit pieces of work (capped at one core) and up agents
// (capped at their rate). The unit rate is what a unit piece gets (or
// would get: with none, it is not used).
func TestShareRates(t *testing.T) {
	for _, c := range []struct {
		name               string
		cores              float64
		nl                 int
		par                float64
		nu, na             int
		rate, wantL, wantU float64
	}{
		{"nothing shared", 2, 1, 1, 1, 0, 0, 1, 1},
		{"a launch alone takes its cores", 2, 1, 1.8, 0, 0, 0, 1.8, 1},
		{"a launch alone on one core", 1, 1, 1.8, 0, 0, 0, 1, 1},
		{"16 launches on one core", 1, 16, 1, 0, 0, 0, 1.0 / 16, 1.0 / 16},
		{"launches and unit work alike", 2, 3, 1.5, 5, 0, 0, 0.25, 0.25},
		{"equal shares below every cap", 2, 2, 2, 1, 0, 0, 2.0 / 3, 2.0 / 3},
		{"one launch of 2 cores beside a unit piece", 3, 1, 2, 1, 0, 0, 2, 1},
		{"a capped unit piece leaves the rest to a launch", 2.5, 1, 2, 1, 0, 0, 1.5, 1},
		{"agents below the fair share get their rate", 1, 1, 1, 0, 4, 0.05, 0.8, 0.8},
		{"agents above the fair share get it", 1, 1, 1, 1, 3, 0.5, 0.2, 0.2},
		{"one agent, one launch", 1, 1, 1, 0, 1, 0.25, 0.75, 0.75},
		{"rates within the cores", 4, 1, 1.5, 1, 10, 0.1, 1.5, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, u := shareRates(c.cores, c.nl, c.par, c.nu, c.na, c.rate)
			if math.Abs(l-c.wantL) > 1e-12 || math.Abs(u-c.wantU) > 1e-12 {
				t.Errorf("launch %v, unit %v; want %v, %v", l, u, c.wantL, c.wantU)
			}
			if used := float64(c.nl)*l + float64(c.nu)*u + float64(c.na)*min(c.rate, max(l, u)); used > c.cores+1e-12 {
				t.Errorf("%v cores used of %v", used, c.cores)
			}
		})
	}
}

// TestPredictLoneLaunch: a launch whose work is more than REM still takes
// REM alone (it may use more than one core), and a flat launch that keeps
// every core busy ends when the pool has done all its work.
func TestPredictLoneLaunch(t *testing.T) {
	f := Forecast{Rem: 0.1, Shared: Shared{Cores: 2, Work: 0.18}}
	for _, c := range []struct {
		kind string
		n    int
		want float64
	}{
		{"flat", 2, 0.1},            // alone: REM, on 1.8 cores
		{"kary:1", 4, 3 * 0.1},      // a chain: each launch alone
		{"flat", 13, 12 * 0.18 / 2}, // every core busy: the pool's work
		{"flat", 3, 2 * 0.18 / 2},   // two launches on two cores
	} {
		got, err := mustBuild(t, c.kind, c.n, Params{}).Predict(f)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s over %d: %v, want %v", c.kind, c.n, got, c.want)
		}
	}
	// With the work below REM a launch keeps to one core and the rest of
	// REM is latency, as before.
	got, _ := mustBuild(t, "flat", 3, Params{}).Predict(Forecast{Rem: 0.1, Shared: Shared{Cores: 1, Work: 0.04}})
	if want := 2*0.04 + 0.06; math.Abs(got-want) > 1e-9 {
		t.Errorf("flat over 3 on one core: %v, want %v", got, want)
	}
}

// TestPredictHandoffShared: with a shared CPU the handoff is work of the
// pool: it is slowed by what else runs, as the agent's and the root's
// processing is on a loaded machine.
func TestPredictHandoffShared(t *testing.T) {
	// Nodes 1 and 2 up at 0.2 (two launches of 0.1 on one core); node 1's
	// handoff (0.05) shares the core with both agents' After (0.1): done
	// at 0.35; node 3's launch (0.1) shares it with what is left of them
	// (0.05 each) until 0.5, then runs alone: up at 0.55.
	pl := mustBuild(t, "kary:2", 4, Params{})
	got, err := pl.Predict(Forecast{Rem: 0.1, Hand: 0.05, Shared: Shared{Cores: 1, Work: 0.1, After: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.55; math.Abs(got-want) > 1e-9 {
		t.Errorf("kary:2 over 4: %v, want %v", got, want)
	}
}

// TestPredictRate: an agent that is up takes its rate of the CPUs until
// the launch ends, slowing the launches still in progress; a flat launch,
// whose agents are all up at its end, does not feel it.
func TestPredictRate(t *testing.T) {
	f := Forecast{Rem: 0.1, Shared: Shared{Cores: 1, Work: 0.1, Rate: 0.25}}
	chain := mustBuild(t, "kary:1", 3, Params{})
	got, err := chain.Predict(f)
	if err != nil {
		t.Fatal(err)
	}
	if want := 0.1 + 0.1/0.75; math.Abs(got-want) > 1e-9 { // node 2's launch gets what node 1 leaves
		t.Errorf("chain: %v, want %v", got, want)
	}
	flat := mustBuild(t, "flat", 5, Params{})
	with, _ := flat.Predict(f)
	f.Shared.Rate = 0
	without, _ := flat.Predict(f)
	if with != without || math.Abs(with-0.4) > 1e-9 {
		t.Errorf("flat: %v with the rate, %v without, want 0.4", with, without)
	}
	// Deeper trees feel it more, and a higher rate never helps.
	prev := map[string]float64{}
	for _, r := range []float64{0, 0.01, 0.02, 0.05} {
		for _, k := range []string{"kary:2", "binomial", "kary:4"} {
			got, _ := mustBuild(t, k, 25, Params{}).Predict(Forecast{Rem: 0.11, Hand: 0.007, Shared: Shared{Cores: 2, Work: 0.17, Rate: r}})
			if got < prev[k] {
				t.Errorf("%s rate %v: %v, faster than at a lower rate (%v)", k, r, got, prev[k])
			}
			prev[k] = got
		}
	}
}

// TestFit: the calibration run's inversion of the model: the fitted term
// reproduces the launch it was fitted on.
func TestFit(t *testing.T) {
	flat := mustBuild(t, "flat", 13, Params{})
	f := Forecast{Rem: 0.11, Hand: 0.007, Shared: Shared{Cores: 2}}
	w, p, err := flat.Fit(f, FitWork, 1.109)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1.109 / 6; math.Abs(w-want) > 1e-9 || math.Abs(p-1.109) > 1e-9 { // 12 launches on 2 cores
		t.Errorf("work %v (predicting %v), want %v", w, p, want)
	}
	deep := mustBuild(t, "kary:2", 25, Params{})
	f.Shared.Work = w
	f.Shared.Rate = 0.04
	target, _ := deep.Predict(f)
	f.Shared.Rate = 0
	r, p, err := deep.Fit(f, FitRate, target)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r-0.04) > 1e-6 || math.Abs(p-target) > 1e-9 {
		t.Errorf("rate %v (predicting %v), want 0.04 (%v)", r, p, target)
	}
	// Faster than the model without the term: 0; slower than the term
	// can make it: the bound.
	if r, p, _ := deep.Fit(f, FitRate, 0.5); r != 0 || p <= 0.5 {
		t.Errorf("a launch faster than the model: rate %v, predicted %v", r, p)
	}
	if r, p, _ := deep.Fit(f, FitRate, 1e6); r != 2 || p >= 1e6 {
		t.Errorf("a launch no rate explains: rate %v, predicted %v", r, p)
	}
	for _, c := range []struct {
		f    Forecast
		term string
		m    float64
	}{
		{Forecast{Rem: 0.1}, FitWork, 1},
		{f, "seq", 1},
		{f, FitWork, 0},
		{f, FitWork, math.NaN()},
	} {
		if _, _, err := flat.Fit(c.f, c.term, c.m); err == nil {
			t.Errorf("fit %s to %v with %+v: no error", c.term, c.m, c.f.Shared)
		}
	}
}

// TestPredictValidation20261128: the first measured validation
// (docs/model.md, "Validation", 2026-11-28): from its calibration run's
// figures the fit gives the W and R the run kept, and the prediction of
// every case's tree is the one the run printed beside the measurement.
// A change to the contention term shows here what it moves.
func TestPredictValidation20261128(t *testing.T) {
	f := Forecast{Rem: 0.434, Hand: 0.016, Shared: Shared{Cores: 2}}
	w, _, err := mustBuild(t, "flat", 13, Params{}).Fit(f, FitWork, 1.193)
	if err != nil || math.Abs(w-0.1518) > 5e-5 {
		t.Fatalf("work %v (%v), want 0.1518 (flat over 12: 1.193 s)", w, err)
	}
	f.Shared.Work = 0.1518
	r, _, err := mustBuild(t, "kary:2", 25, Params{}).Fit(f, FitRate, 3.701)
	if err != nil || math.Abs(r-0.05597) > 5e-6 {
		t.Fatalf("rate %v (%v), want 0.05597 (kary:2 over 24: 3.701 s)", r, err)
	}
	f.Shared.Rate = 0.05597
	for _, c := range []struct {
		tree  string
		hosts int
		want  float64 // as printed, 3 decimals
	}{
		{"flat", 8, 0.889}, {"kary:4", 8, 1.226}, {"binomial", 8, 1.592}, {"greedy", 8, 1.958},
		{"flat", 16, 1.497}, {"kary:4", 16, 1.921}, {"binomial", 16, 2.707}, {"greedy", 16, 3.045},
		{"flat", 32, 2.711}, {"kary:4", 32, 4.677}, {"binomial", 32, 6.422}, {"greedy", 32, 6.909},
	} {
		got, err := mustBuild(t, c.tree, c.hosts+1, Params{}).Predict(f)
		if err != nil || math.Abs(got-c.want) > 5e-4 {
			t.Errorf("%s over %d hosts: %v (%v), want %.3f", c.tree, c.hosts, got, err, c.want)
		}
	}
	// Processor sharing with SEQ 0: a flat launch's agents are all up at
	// its end, so the rate never acts on it.
	flat := mustBuild(t, "flat", 33, Params{})
	for _, rate := range []float64{0, 0.1} {
		g := f
		g.Shared.Rate = rate
		if got, _ := flat.Predict(g); math.Abs(got-2.711) > 5e-4 {
			t.Errorf("flat over 32 hosts at rate %v: %v, want 2.711 as at 0.05597", rate, got)
		}
	}
}
