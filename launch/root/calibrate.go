package root

// The root's side of the launch-time model (launch/calibrate decides):
// the plan it predicts before the launch, the measurement it records and
// keeps once every agent is up.

import (
	"github.com/ftlaunch/ftlaunch/launch/calibrate"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// buildPlan builds the launch plan of kind over n nodes and fixes the
// model's prediction of this launch for it (calibrate.Launch.Plan).
func (fe *frontend) buildPlan(kind plan.Kind, n int, params plan.Params) (*plan.Plan, error) {
	p, err := fe.opts.Agents.Model(fe.opts.N, fe.warnf, fe.verbosef).Plan(kind, n, params)
	if err != nil {
		return nil, err
	}
	fe.model = p
	return p.Plan, nil
}

// launchReport runs once every agent is up: the launch as measured, from
// the agents' starts as the root saw them, goes to the state log, and
// beside the prediction, to the kept calibration and in a breakdown per
// launching agent to the user (calibrate.Launch.Done).
func (fe *frontend) launchReport() {
	starts := make([]calibrate.Start, len(fe.agents))
	for i, a := range fe.agents {
		starts[i] = calibrate.Start{Node: a.name, Parent: fe.topo.Parent(a.idx), Up: a.info.Up, Queued: a.info.Queued,
			Spawn: a.info.SSH, Init: a.info.Init, UpAt: a.upAt, Spec: a.specAt, Running: a.ranksAt}
	}
	fe.journal.LaunchMeasured(fe.opts.Agents.Model(fe.opts.N, fe.warnf, fe.verbosef).Done(fe.model, starts, fe.launchBegan))
}
