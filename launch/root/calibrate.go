package root

// The root's side of the launch-time model (launch/calibrate decides):
// the plan it predicts before the launch, the measurement it records and
// keeps once every agent is up.

import (
	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// starts are the agents' starts as the root saw them, by agent index.
func (fe *frontend) starts() []calibrate.Start {
	out := make([]calibrate.Start, len(fe.agents))
	for i, a := range fe.agents {
		out[i] = calibrate.Start{Node: a.name, Parent: fe.topo.Parent(a.idx), Up: a.info.Up, Queued: a.info.Queued, Spawn: a.info.SSH,
			Init: a.info.Init, UpAt: a.upAt, Spec: a.specAt, Running: a.ranksAt}
	}
	return out
}

// calibrate keeps this launch's measurement (calibrate.Keep); failures to
// keep it are reported, not fatal.
func (fe *frontend) calibrate() {
	k, err := calibrate.Keep(fe.opts.Agents.Launcher, fe.starts(), fe.autoChoice)
	if err != nil {
		fe.warnf("%v", err)
	} else if k != nil {
		fe.verbosef("calibration: %s", k.Summary(fe.opts.Agents.Launcher))
	}
}

// buildPlan builds the launch plan of kind over n nodes for the job's
// ranks (calibrate.Plan) and fixes the model's prediction of this launch
// for it.
func (fe *frontend) buildPlan(kind plan.Kind, n int, params plan.Params) (*plan.Plan, error) {
	m, err := calibrate.ModelFor(fe.opts.Agents.Launcher, !fe.opts.Agents.Remote(), n, fe.opts.N)
	if err != nil {
		fe.warnf("launch model: %v (using its defaults)", err)
	}
	p, err := calibrate.Plan(kind, n, params, m)
	if err != nil {
		return nil, err
	}
	if p.Why != "" {
		fe.verbosef("auto %s", p.Why)
	}
	fe.autoChoice, fe.prediction = p.Auto, &p.Pred
	return p.Plan, nil
}

// checkModel measures the launch once every agent is up (from its start
// until the last agent connected back), records it beside the prediction
// with each agent's SEQ and REM, and says both with --verbose.
func (fe *frontend) checkModel() {
	m := calibrate.Measured(fe.starts(), fe.launchBegan)
	fe.journal.LaunchMeasured(m)
	if fe.prediction != nil {
		fe.verbosef("model: %s", calibrate.Compared(*fe.prediction, m))
	}
}
