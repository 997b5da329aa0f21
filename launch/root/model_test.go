package root

import (
	"math"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/topology"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// TestAgentSamples: each agent's REM (its launcher's time less its
// queueing), SEQ (the gap since its previous sibling) and handoff (its
// children's earliest launch start at the root less its own time up) as
// the state log keeps them.
func TestAgentSamples(t *testing.T) {
	pl, err := plan.Build(plan.Kind{Shape: plan.KAry, K: 2}, 5, plan.Params{})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a0", "a1", "a2", "a3"}
	tree, err := topology.FromPlan(pl, names)
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	fe := &frontend{}
	fe.topo = tree
	for i, x := range []struct{ up, queued, upAt time.Duration }{
		{100 * ms, 10 * ms, 150 * ms}, // a0, under the root; launches a2 and a3
		{120 * ms, 0, 170 * ms},       // a1, under the root
		{80 * ms, 0, 300 * ms},        // a2, under a0: a0 began launching at 220 ms
		{90 * ms, 5 * ms, 305 * ms},   // a3, under a0: at 215 ms by its report
	} {
		fe.agents = append(fe.agents, &agentHandle{idx: i, name: names[i], info: proto.ChildUp{Up: x.up, Queued: x.queued}, upAt: x.upAt})
	}
	want := map[string]journal.AgentSample{
		"a0": {Node: "a0", Parent: journal.RootName, Rem: 0.090, Hand: 0.065},
		"a1": {Node: "a1", Parent: journal.RootName, Rem: 0.120, Seq: 0.020},
		"a2": {Node: "a2", Parent: "a0", Rem: 0.080},
		"a3": {Node: "a3", Parent: "a0", Rem: 0.085, Seq: 0.010},
	}
	got := fe.agentSamples()
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d: %+v", len(got), len(want), got)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for _, s := range got {
		w := want[s.Node]
		if s.Parent != w.Parent || !near(s.Rem, w.Rem) || !near(s.Seq, w.Seq) || !near(s.Hand, w.Hand) {
			t.Errorf("%s: %+v, want %+v", s.Node, s, w)
		}
	}
}
