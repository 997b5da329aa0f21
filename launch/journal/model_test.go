package journal

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// TestJournalModelCheck: the prediction recorded with the first plan and
// the launch's measurement read back as typed fields of the report (and of
// its JSON), each agent with its sample; a later plan's prediction and a
// second measurement (a restarted job's) do not replace the launch's.
func TestJournalModelCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-model", Argv: []string{"./app"}, N: 2}, Solo: true, Hold: make(chan struct{})}
	j := openCfg(t, cfg)
	p := Plan{Kind: "greedy", Root: RootName, Nodes: []PlanNode{{Name: "a", Primary: RootName}, {Name: "b", Primary: "a"}}}
	p.Model = &ModelPrediction{Tree: "greedy", PredictedSeconds: 0.8, Seq: 0.05, Rem: 0.4, Source: "calibration", Quantile: 0.5, RemLow: 0.3, RemHigh: 0.5, Launches: 4}
	j.Plan(p)
	j.LaunchMeasured(ModelMeasured{MeasuredSeconds: 1.0, Agents: []AgentSample{{Node: "a", Parent: RootName, Rem: 0.41}, {Node: "b", Parent: "a", Rem: 0.45, Seq: 0}}})
	p2 := p
	p2.Change, p2.Model = "b moved", &ModelPrediction{Tree: "other", PredictedSeconds: 9}
	j.Plan(p2)
	j.LaunchMeasured(ModelMeasured{MeasuredSeconds: 7})
	if err := j.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	rep := Analyze(in.State)
	m := rep.Model
	if m == nil {
		t.Fatal("no model in the report")
	}
	if m.Tree != "greedy" || m.PredictedSeconds != 0.8 || m.MeasuredSeconds != 1.0 || m.Source != "calibration" || m.RemLow != 0.3 || m.Launches != 4 {
		t.Errorf("model %+v", *m)
	}
	if math.Abs(m.Error-(-0.2)) > 1e-9 {
		t.Errorf("error %v, want -0.2", m.Error)
	}
	if len(rep.Agents) != 2 || rep.Agents[0].Rem != 0.41 || rep.Agents[1].Rem != 0.45 {
		t.Errorf("agents %+v", rep.Agents)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Model struct {
			Predicted float64 `json:"predicted_seconds"`
			Measured  float64 `json:"measured_seconds"`
		} `json:"model"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Model.Predicted != 0.8 || back.Model.Measured != 1.0 {
		t.Errorf("json model %+v, %v", back.Model, err)
	}
}

// The collectives' totals and a stranded collective, read back as typed
// fields of the report (a second totals record, a successor's, replaces
// the first).
func TestJournalCollectives(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{StateDir: dir, Node: "fe", Job: Job{ID: "ft-colls", Argv: []string{"./app"}, N: 2}, Solo: true, Hold: make(chan struct{})}
	j := openCfg(t, cfg)
	j.Collectives(CollTotals{Kinds: []CollTotal{{Kind: "publish", Count: 1, Messages: 4, Agents: 4, BytesDown: 99}}})
	j.Stranded(Stranded{Node: "a", Rank: raftstore.NoRank, Seq: 3, Epoch: 1, Op: "barrier"})
	want := []CollTotal{{Kind: "barrier", Count: 2, Messages: 4, Agents: 8, BytesDown: 28}, {Kind: "ring", Count: 1, Messages: 2, Agents: 4, BytesDown: 40}}
	j.Collectives(CollTotals{Kinds: want})
	if err := j.Close(context.Background(), 0, ""); err != nil {
		t.Fatal(err)
	}
	in, err := raftstore.OpenReadOnly(j.ReplicaDir())
	if err != nil {
		t.Fatal(err)
	}
	rep := Analyze(in.State)
	if !slices.Equal(rep.Collectives, want) {
		t.Errorf("collectives %+v, want %+v", rep.Collectives, want)
	}
	if len(rep.Stranded) != 1 || rep.Stranded[0] != (Stranded{Node: "a", Rank: raftstore.NoRank, Seq: 3, Epoch: 1, Op: "barrier"}) {
		t.Errorf("stranded %+v", rep.Stranded)
	}
}
