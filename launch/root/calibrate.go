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
	for _, g := range groups {
		var up, queued []time.Duration
		for _, a := range g {
			up = append(up, a.info.Up)
			queued = append(queued, a.info.Queued)
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
	p, err := calibrate.SaveCalibration(fe.opts.Launcher, total)
	if err != nil {
		fe.warnf("%v", err)
		return
	}
	fe.verbosef("calibration: REM %.3f s, SEQ %.3f s from %d agents (kept in %s; ftlaunch plan --calibrated --launcher %s shows it)", total.Rem, total.Seq, total.Agents, p, cmp.Or(fe.opts.Launcher, "ssh"))
}

// modelCalibration is what the launch-time model takes for this launch:
// for test nodes a local process start, else the calibration kept before
// this launch (never refitted on it), else the model's defaults. source
// names which ("test-nodes", "calibration", "defaults").
func (fe *frontend) modelCalibration() (c plan.Calibration, source string) {
	if fe.opts.SSH == nil {
		// Test nodes: a local process start, not the model's defaults
		// (which are a remote launch's and made a deeper tree, 3-4x
		// slower for a few test nodes).
		return plan.Calibration{Seq: localSeq.Seconds(), Rem: localRem.Seconds()}, "test-nodes"
	}
	if k, err := calibrate.LoadCalibration(fe.opts.Launcher); err == nil && k != nil {
		return plan.Calibration{Seq: k.Seq, Rem: k.Rem}, "calibration"
	}
	return plan.Calibration{Seq: plan.DefaultSeq, Rem: plan.DefaultRem}, "defaults"
}

// predict fixes the model's prediction of this launch (from its start
// until the last agent connected back) for plan pl.
func (fe *frontend) predict(pl *plan.Plan, c plan.Calibration, source string) {
	t, err := pl.ModelTime(plan.Model{Seq: c.Seq, Rem: c.Rem})
	if err != nil {
		fe.warnf("launch model: %v", err)
		return
	}
	fe.prediction = &journal.ModelPrediction{Tree: pl.Kind.String(), PredictedSeconds: t, Seq: c.Seq, Rem: c.Rem, Source: source}
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
		fe.verbosef("model: predicted %.3f s, measured %.3f s (%s tree; seq %.3f s, rem %.3f s from %s)",
			fe.prediction.PredictedSeconds, m.MeasuredSeconds, fe.prediction.Tree, fe.prediction.Seq, fe.prediction.Rem, fe.prediction.Source)
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
			out = append(out, s)
		}
	}
	return out
}
