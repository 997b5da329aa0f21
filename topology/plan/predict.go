package plan

import (
	"context"
	"fmt"
)

// Forecast holds what a launch's prediction needs, in seconds: SEQ, REM
// (an uncontended remote launch, until the child has connected back), the
// handoff Hand (a node other than the root starts its children Hand after
// it is up: SimConfig.Hand) and the contention term (the zero Shared:
// none).
type Forecast struct {
	Seq, Rem, Hand float64
	Shared         Shared
}

// Predict returns the forecast launch time of pl: from the start of the
// launch until the last node is up. Without a handoff and a contention
// term it is ModelTime exactly; with them, one deterministic run of the
// simulator with a constant REM.
func (pl *Plan) Predict(f Forecast) (float64, error) {
	if f.Shared.Cores == 0 && f.Hand == 0 {
		return pl.ModelTime(Model{Seq: f.Seq, Rem: f.Rem})
	}
	res, err := Simulate(context.Background(), pl, SimConfig{Seq: f.Seq, Rem: RemDist{Const: f.Rem}, Hand: f.Hand, Shared: f.Shared, Runs: 1})
	if err != nil {
		return 0, err
	}
	return res.Median, nil
}

// Choice names a tree --tree auto chose: Tree is a kind in ParseKind's
// syntax, "auto" for the greedy tree shaped by Seq and Rem.
type Choice struct {
	Tree     string
	Seq, Rem float64
}

// Chosen is auto's choice: the plan, what it is (to keep for the next
// launch), its predicted time, and Why, a sentence when auto kept its
// previous tree or changed it ("" for a first choice or the same tree).
type Chosen struct {
	Plan      *Plan
	Choice    Choice
	Predicted float64
	Why       string
}

// autoCandidates are the trees auto weighs under f: the greedy tree
// shaped by f (optimal without a handoff and a contention term, so the
// only one then); with them, also greedy shaped by REM + Hand and by the
// shared CPU's gap, and the fixed shapes.
func autoCandidates(f Forecast) []Choice {
	cs := []Choice{{Tree: "auto", Seq: f.Seq, Rem: f.Rem}}
	if f.Shared.Cores == 0 && f.Hand == 0 {
		return cs
	}
	cs = append(cs, Choice{Tree: "auto", Seq: f.Seq, Rem: f.Rem + f.Hand})
	if f.Shared.Cores > 0 {
		cs = append(cs, Choice{Tree: "auto", Seq: f.Seq + f.Shared.Work/float64(f.Shared.Cores), Rem: f.Rem + f.Hand})
	}
	for _, k := range []string{"kary:2", "kary:3", "kary:4", "kary:6", "kary:8", "kary:12", "kary:16", "binomial", "2level", "flat"} {
		cs = append(cs, Choice{Tree: k})
	}
	return cs
}

// build builds the tree c names over n nodes.
func (c Choice) build(n int, p Params) (*Plan, error) {
	k, err := ParseKind(c.Tree)
	if err != nil {
		return nil, err
	}
	if k.Shape == Auto {
		p.Calibration = &Calibration{Seq: c.Seq, Rem: c.Rem}
	}
	return Build(k, n, p)
}

// ChooseAuto picks auto's tree over n nodes: the candidate with the least
// predicted time under f (the first on ties). If prev (the tree auto
// chose for the last launch of n nodes) is not nil, it is kept unless the
// new choice is faster by more than noise (a fraction of prev's predicted
// time): the calibration's noise alone does not change the tree. p gives
// the replicas; its shaping fields are ignored.
func ChooseAuto(n int, f Forecast, p Params, prev *Choice, noise float64) (Chosen, error) {
	var best Chosen
	for i, c := range autoCandidates(f) {
		pl, err := c.build(n, p)
		if err != nil {
			return Chosen{}, fmt.Errorf("auto: %w", err)
		}
		t, err := pl.Predict(f)
		if err != nil {
			return Chosen{}, fmt.Errorf("auto: %w", err)
		}
		if i == 0 || t < best.Predicted {
			best = Chosen{Plan: pl, Choice: c, Predicted: t}
		}
	}
	if prev == nil || *prev == best.Choice {
		return best, nil
	}
	pl, err := prev.build(n, p)
	if err != nil {
		return best, nil // a previous choice this build cannot make: forget it
	}
	t, err := pl.Predict(f)
	if err != nil {
		return Chosen{}, fmt.Errorf("auto: %w", err)
	}
	gain := (t - best.Predicted) / t
	if gain <= noise {
		return Chosen{Plan: pl, Choice: *prev, Predicted: t,
			Why: fmt.Sprintf("kept its last tree (%s): the best now (%s) is %.0f %% faster, within the calibration's noise (%.0f %%)", prev, best.Choice, 100*gain, 100*noise)}, nil
	}
	best.Why = fmt.Sprintf("changed its tree from %s to %s: %.0f %% faster, beyond the calibration's noise (%.0f %%)", prev, best.Choice, 100*gain, 100*noise)
	return best, nil
}

// String names the choice: its kind, with the figures that shaped a
// greedy tree.
func (c Choice) String() string {
	if c.Tree == "auto" {
		return fmt.Sprintf("greedy shaped by seq %.3f s, rem %.3f s", c.Seq, c.Rem)
	}
	return c.Tree
}

// Terms of the contention term that Fit solves for.
const (
	FitWork = "work" // Shared.Work: CPU-seconds of each launch
	FitRate = "rate" // Shared.Rate: cores each agent takes once up
)

// Fit solves for one term of f's contention term (FitWork or FitRate):
// the value at which pl's predicted launch time (Predict) is measured
// seconds, by bisection over [0, an upper bound] (Work: measured times
// the cores, the most one launch can have taken; Rate: every core). It
// returns the value and the prediction with it, which differs from
// measured only where no value reaches it: 0 when the prediction without
// the term is already as slow, the bound when the term cannot make it
// slow enough. The calibration run (chaos/validate-model.sh) fits Work on
// its flat launches and Rate on its deep ones, so that the model
// reproduces the launches it was calibrated on.
func (pl *Plan) Fit(f Forecast, term string, measured float64) (value, predicted float64, err error) {
	if f.Shared.Cores < 1 {
		return 0, 0, fmt.Errorf("fit %s: needs a shared CPU (cores >= 1)", term)
	}
	if err := checkSeconds("measured", measured); err != nil || measured == 0 {
		return 0, 0, fmt.Errorf("fit %s: measured = %v: must be a number of seconds > 0", term, measured)
	}
	var set func(float64)
	var hi float64
	switch term {
	case FitWork:
		set, hi = func(x float64) { f.Shared.Work = x }, measured*float64(f.Shared.Cores)
	case FitRate:
		set, hi = func(x float64) { f.Shared.Rate = x }, float64(f.Shared.Cores)
	default:
		return 0, 0, fmt.Errorf("fit %q: want %s or %s", term, FitWork, FitRate)
	}
	at := func(x float64) (float64, error) {
		set(x)
		return pl.Predict(f)
	}
	if p, err := at(0); err != nil || p >= measured {
		return 0, p, err
	}
	if p, err := at(hi); err != nil || p < measured {
		return hi, p, err
	}
	lo := 0.0
	for range 60 {
		mid := (lo + hi) / 2
		p, err := at(mid)
		if err != nil {
			return 0, 0, err
		}
		if p < measured {
			lo = mid
		} else {
			hi = mid
		}
	}
	p, err := at(hi)
	return hi, p, err
}
