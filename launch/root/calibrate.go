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

// modelLaunch is this launch as the model takes it (calibrate.Launch).
func (fe *frontend) modelLaunch() calibrate.Launch {
	g := fe.opts.Agents
	return calibrate.Launch{Launcher: g.Launcher, StartedBy: g.StartedBy(), Local: !g.Remote(), Keep: g.Remote() && !g.GroupStart,
		Ranks: fe.opts.N, Warnf: fe.warnf, Verbosef: fe.verbosef}
}

// buildPlan builds the launch plan of kind over n nodes and fixes the
// model's prediction of this launch for it (calibrate.Launch.Plan).
func (fe *frontend) buildPlan(kind plan.Kind, n int, params plan.Params) (*plan.Plan, error) {
	p, err := fe.modelLaunch().Plan(kind, n, params)
	if err != nil {
		return nil, err
	}
	fe.model = p
	return p.Plan, nil
}

// launchReport runs once every agent is up: the launch as measured goes
// to the state log, and beside the prediction, to the kept calibration
// and in a breakdown per launching agent to the user (calibrate.Launch.Done).
func (fe *frontend) launchReport() {
	fe.journal.LaunchMeasured(fe.modelLaunch().Done(fe.model, fe.starts(), fe.launchBegan))
}
