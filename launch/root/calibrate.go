package root

import (
	"cmp"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// calibrate measures this launch from every launcher's starts and keeps
// the result; failures to keep it are reported, not fatal. REM is the
// fastest start of all; SEQ the mean of each launcher's, weighted by its
// gaps.
func (fe *frontend) calibrate() {
	groups := map[int][]*agentHandle{}
	for _, a := range fe.agents {
		p := fe.topo.Parent(a.idx)
		groups[p] = append(groups[p], a)
	}
	var total calibrate.Calibration
	gaps := 0
	var rems []float64
	for _, g := range groups {
		var up, queued []time.Duration
		for _, a := range g {
			up = append(up, a.info.Up)
			queued = append(queued, a.info.Queued)
			if r := (a.info.Up - a.info.Queued).Seconds(); r > 0 {
				rems = append(rems, r)
			}
		}
		c, ok := calibrate.Measure(up, queued)
		if !ok {
			continue
		}
		if total.Agents == 0 || c.Rem < total.Rem {
			total.Rem = c.Rem
		}
		total.Seq += c.Seq * float64(len(g)-1)
		gaps += len(g) - 1
		total.Agents += len(g)
		total.Measured = c.Measured
	}
	if total.Agents == 0 {
		return
	}
	if gaps > 0 {
		total.Seq /= float64(gaps)
	}
	// The kept calibration as it is now (another launch may have added
	// to it since this one began), with this launch's figure added.
	kept, err := calibrate.LoadCalibration(fe.opts.Launcher)
	if err != nil || kept == nil {
		kept = &calibrate.Calibration{}
	}
	var hands []float64
	for _, s := range fe.agentSamples() {
		if s.Hand > 0 {
			hands = append(hands, s.Hand)
		}
	}
	fig := calibrate.Figure{Seq: total.Seq, Rem: total.Rem, Agents: total.Agents, Measured: total.Measured}
	if len(hands) > 0 {
		fig.Hand = calibrate.Quantile(hands, 0.5)
	}
	kept.Add(fig, rems)
	if fe.autoChoice != nil {
		kept.Auto = fe.autoChoice
	}
	p, err := calibrate.SaveCalibration(fe.opts.Launcher, *kept)
	if err != nil {
		fe.warnf("%v", err)
		return
	}
	fe.verbosef("calibration: REM %.3f s, SEQ %.3f s from %d agents; kept REM %.3f s (p50 of %d launches, p25-p75 %.3f-%.3f s), SEQ %.3f s (in %s; ftlaunch plan --calibrated --launcher %s shows it)",
		total.Rem, total.Seq, total.Agents, kept.Rem, len(kept.Window), kept.RemQuantile(0.25), kept.RemQuantile(0.75), kept.Seq, p, cmp.Or(fe.opts.Launcher, "ssh"))
}

// modelInputs is what the launch-time model takes for this launch: for
// test nodes a local process start, else the calibration kept before this
// launch (never refitted on it: its window's medians, and its shared-CPU
// term if a calibration run measured one), else the model's defaults.
// pred holds the figures for the state log; prev is auto's last choice
// for as many nodes, noise the calibration's.
type modelInputs struct {
	f     plan.Forecast
	pred  journal.ModelPrediction
	noise float64
	prev  *plan.Choice
	kept  *calibrate.Calibration
}

func (fe *frontend) modelInputs(n int) modelInputs {
	if fe.opts.SSH == nil {
		// Test nodes: a local process start, not the model's defaults
		// (which are a remote launch's and made a deeper tree, 3-4x
		// slower for a few test nodes).
		f := plan.Forecast{Seq: localSeq.Seconds(), Rem: localRem.Seconds()}
		return modelInputs{f: f, pred: journal.ModelPrediction{Seq: f.Seq, Rem: f.Rem, Source: "test-nodes"}, noise: calibrate.MinNoise}
	}
	k, err := calibrate.LoadCalibration(fe.opts.Launcher)
	if err != nil {
		fe.warnf("launch model: %v (using its defaults)", err)
	}
	if k == nil {
		f := plan.Forecast{Seq: plan.DefaultSeq, Rem: plan.DefaultRem}
		return modelInputs{f: f, pred: journal.ModelPrediction{Seq: f.Seq, Rem: f.Rem, Source: "defaults"}, noise: calibrate.MinNoise}
	}
	in := modelInputs{kept: k, noise: k.Noise()}
	in.f = plan.Forecast{Seq: k.SeqQuantile(0.5), Rem: k.RemQuantile(0.5), Hand: k.HandQuantile(0.5)}
	in.pred = journal.ModelPrediction{Source: "calibration", Quantile: 0.5, RemLow: k.RemQuantile(0.25), RemHigh: k.RemQuantile(0.75), Launches: max(len(k.Window), 1)}
	if sh := k.Shared; sh != nil {
		// A machine whose hosts share its CPUs: the calibration run's
		// uncontended figures and its contention term.
		in.f = plan.Forecast{Seq: sh.Seq, Rem: sh.Rem, Hand: sh.Hand, Shared: plan.Shared{Cores: sh.Cores, Work: sh.Work, After: sh.After}}
		in.pred.Source, in.pred.Cores, in.pred.Work, in.pred.After = "calibration run", sh.Cores, sh.Work, sh.After
	}
	in.pred.Seq, in.pred.Rem, in.pred.Hand = in.f.Seq, in.f.Rem, in.f.Hand
	if a := k.Auto; a != nil && a.Nodes == n {
		in.prev = &plan.Choice{Tree: a.Tree, Seq: a.Seq, Rem: a.Rem}
	}
	return in
}

// buildPlan builds the launch plan of kind over n nodes, auto's by
// ChooseAuto, and fixes the model's prediction of this launch (from its
// start until the last agent connected back) for it.
func (fe *frontend) buildPlan(kind plan.Kind, n int, params plan.Params) (*plan.Plan, error) {
	in := fe.modelInputs(n)
	pred := in.pred
	var pl *plan.Plan
	if kind.Shape == plan.Auto {
		ch, err := plan.ChooseAuto(n, in.f, params, in.prev, in.noise)
		if err != nil {
			return nil, err
		}
		pl, pred.PredictedSeconds, pred.Choice = ch.Plan, ch.Predicted, ch.Why
		if in.kept != nil {
			fe.autoChoice = &calibrate.Choice{Nodes: n, Tree: ch.Choice.Tree, Seq: ch.Choice.Seq, Rem: ch.Choice.Rem}
		}
		if ch.Why != "" {
			fe.verbosef("auto %s", ch.Why)
		}
	} else {
		var err error
		if pl, err = plan.Build(kind, n, params); err != nil {
			return nil, err
		}
		if pred.PredictedSeconds, err = pl.Predict(in.f); err != nil {
			return nil, err
		}
	}
	pred.Tree = pl.Kind.String()
	fe.prediction = &pred
	return pl, nil
}

// checkModel measures the launch once every agent is up (from its start
// until the last agent connected back), records it beside the prediction
// with each agent's SEQ and REM, and says both with --verbose.
func (fe *frontend) checkModel() {
	var last time.Duration
	for _, a := range fe.agents {
		last = max(last, a.upAt)
	}
	m := journal.ModelMeasured{MeasuredSeconds: (last - fe.launchBegan).Seconds(), Agents: fe.agentSamples()}
	fe.journal.LaunchMeasured(m)
	if fe.prediction != nil {
		fe.verbosef("model: predicted %.3f s, measured %.3f s (%s tree; seq %.3f s, rem %.3f s, handoff %.3f s from %s)",
			fe.prediction.PredictedSeconds, m.MeasuredSeconds, fe.prediction.Tree, fe.prediction.Seq, fe.prediction.Rem, fe.prediction.Hand, fe.prediction.Source)
	}
}

// agentSamples is each agent's launch as its launcher measured it: REM
// from leaving the spawner's queue until connected back, SEQ the gap
// since its previous sibling connected back (0 for the first).
func (fe *frontend) agentSamples() []journal.AgentSample {
	groups := map[int][]*agentHandle{}
	var parents []int
	for _, a := range fe.agents {
		p := fe.topo.Parent(a.idx)
		if groups[p] == nil {
			parents = append(parents, p)
		}
		groups[p] = append(groups[p], a)
	}
	out := make([]journal.AgentSample, 0, len(fe.agents))
	// An agent's handoff: when it began launching (its children's
	// reports less their times since then, the earliest) less when it
	// was up.
	began := map[int]time.Duration{}
	for _, p := range parents {
		if p < 0 {
			continue
		}
		for _, c := range groups[p] {
			if b := c.upAt - c.info.Up; began[p] == 0 || b < began[p] {
				began[p] = b
			}
		}
	}
	for _, p := range parents {
		g := slices.Clone(groups[p])
		slices.SortStableFunc(g, func(a, b *agentHandle) int { return cmp.Compare(a.info.Up, b.info.Up) })
		parent := journal.RootName
		if p >= 0 {
			parent = fe.agents[p].name
		}
		for i, a := range g {
			s := journal.AgentSample{Node: a.name, Parent: parent, Rem: (a.info.Up - a.info.Queued).Seconds()}
			if i > 0 {
				s.Seq = (a.info.Up - g[i-1].info.Up).Seconds()
			}
			if b, ok := began[a.idx]; ok && b > a.upAt {
				s.Hand = (b - a.upAt).Seconds()
			}
			out = append(out, s)
		}
	}
	return out
}
