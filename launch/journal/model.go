package journal

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ftlaunch/ftlaunch/raftstore"
)

// The launch-time model's check of each launch (docs/model.md, "Every
// launch checks itself"): the prediction fixed when the tree was chosen,
// recorded with the plan, and what the launch measured, recorded once
// every agent is up. Both are events of the root whose detail is the step
// name and a JSON object (ModelPrediction, ModelMeasured), read back into
// typed fields by Analyze.
const (
	StepModel    = "model"    // the launch-time prediction (with the first plan)
	StepMeasured = "measured" // the launch as measured, with per-agent SEQ and REM
)

// ModelPrediction is the model's forecast of the launch, from its start
// until the last agent connected back, fixed when the tree was chosen from
// the calibration kept before this launch.
type ModelPrediction struct {
	Tree             string  `json:"tree"`
	PredictedSeconds float64 `json:"predicted_seconds"`
	// Seq and Rem are the model's parameters the prediction used
	// (seconds); Source says where they came from: "calibration" (the
	// kept one), "defaults", "test-nodes", or "flags".
	Seq    float64 `json:"seq_seconds"`
	Rem    float64 `json:"rem_seconds"`
	Hand   float64 `json:"hand_seconds,omitempty"`
	Source string  `json:"source"`
	// Quantile is the quantile of the kept window Seq and Rem are (0:
	// one figure), RemLow and RemHigh its spread (the window's p25 and
	// p75 of REM), Launches the window's size.
	Quantile float64 `json:"quantile,omitempty"`
	RemLow   float64 `json:"rem_p25_seconds,omitempty"`
	RemHigh  float64 `json:"rem_p75_seconds,omitempty"`
	Launches int     `json:"launches,omitempty"`
	// Cores, Work, After and Rate are the contention term (0: none):
	// launches share Cores CPUs, each using Work CPU-seconds of them, and
	// each agent After more once it is up and Rate cores from then until
	// the launch ends.
	Cores int     `json:"cores,omitempty"`
	Work  float64 `json:"work_seconds,omitempty"`
	After float64 `json:"work_after_seconds,omitempty"`
	Rate  float64 `json:"work_rate,omitempty"`
	// Choice says how auto chose the tree (kept its previous one, or
	// changed it, and why); "" for other trees.
	Choice string `json:"choice,omitempty"`
}

// AgentSample is one agent's launch as its launcher measured it: REM,
// from leaving the spawner's queue until it connected back, and SEQ, the
// gap since its previous sibling connected back (0 for the first one).
// Hand, for an agent with children, is its handoff: from its being up at
// the root until it began launching its children (as the root sees it:
// its first child's report less that child's time since then).
type AgentSample struct {
	Node   string  `json:"node"`
	Parent string  `json:"parent"`
	Rem    float64 `json:"rem_seconds"`
	Seq    float64 `json:"seq_seconds"`
	Hand   float64 `json:"hand_seconds,omitempty"`
}

// ModelMeasured is the launch as measured: from the start of the launch
// until the last agent connected back, and each agent's sample.
type ModelMeasured struct {
	MeasuredSeconds float64       `json:"measured_seconds"`
	Agents          []AgentSample `json:"agents,omitempty"`
}

// ReportModel is a launch's prediction beside its measurement; Error is
// (predicted - measured) / measured, zero when either is missing.
type ReportModel struct {
	ModelPrediction
	MeasuredSeconds float64       `json:"measured_seconds,omitempty"`
	Error           float64       `json:"error,omitempty"`
	Agents          []AgentSample `json:"agents,omitempty"`
}

// LaunchMeasured records the launch as measured. Call it once every agent
// is up.
func (j *Journal) LaunchMeasured(m ModelMeasured) { j.push(record{model: &m}) }

func modelEvent(at time.Time, step string, v any) (raftstore.Event, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return raftstore.Event{}, fmt.Errorf("%s record: %w", step, err)
	}
	return raftstore.Event{Time: at, Kind: raftstore.EventLaunch, Node: RootName, Rank: raftstore.NoRank, Detail: detail(step, "%s", b)}, nil
}

func (w *writer) absorbMeasured(at time.Time, m *ModelMeasured) {
	ev, err := modelEvent(at, StepMeasured, m)
	if err != nil {
		w.bad("%v", err)
		return
	}
	w.event(ev)
}

// analyzeModel reads a model or measured event into rep.Model; it
// reports whether ev was one.
func analyzeModel(rep *Report, ev *raftstore.Event) bool {
	step, text := Step(ev)
	if ev.Kind != raftstore.EventLaunch || (step != StepModel && step != StepMeasured) {
		return false
	}
	if rep.Model == nil {
		rep.Model = &ReportModel{}
	}
	m := rep.Model
	switch step {
	case StepModel:
		if m.Tree != "" {
			return true // the first launch's, not a restart's
		}
		_ = json.Unmarshal([]byte(text), &m.ModelPrediction)
	case StepMeasured:
		if m.MeasuredSeconds != 0 {
			return true
		}
		var x ModelMeasured
		if json.Unmarshal([]byte(text), &x) == nil {
			m.MeasuredSeconds, m.Agents = x.MeasuredSeconds, x.Agents
		}
	}
	if m.PredictedSeconds > 0 && m.MeasuredSeconds > 0 {
		m.Error = (m.PredictedSeconds - m.MeasuredSeconds) / m.MeasuredSeconds
	}
	return true
}

// StepCollectives is the event of the collectives' totals (CollTotals),
// recorded by the root that ends the job.
const StepCollectives = "collectives"

// CollTotal is what the collectives of one kind cost the root that
// answered them (docs/collectives.md, "What the root says"): how many it
// answered, the contributions it received for them, the agents those
// covered, and the bytes it sent its children with the answers.
type CollTotal struct {
	Kind      string `json:"kind"`
	Count     int    `json:"count"`
	Messages  int    `json:"messages_at_root"`
	Agents    int    `json:"agents_covered"`
	BytesDown int64  `json:"bytes_sent_down"`
}

// CollTotals are the totals of each kind of collective the root answered
// (by kind's name).
type CollTotals struct {
	Kinds []CollTotal `json:"kinds"`
}

// Collectives records the collectives' totals. The root that ends the job
// calls it once, before Close.
func (j *Journal) Collectives(t CollTotals) { j.push(record{colls: &t}) }

// analyzeCollectives reads a collectives event into rep.Collectives (the
// last one: a successor's replaces its predecessor's); it reports whether
// ev was one.
func analyzeCollectives(rep *Report, ev *raftstore.Event) bool {
	step, text := Step(ev)
	if ev.Kind != raftstore.EventLaunch || step != StepCollectives {
		return false
	}
	var t CollTotals
	if json.Unmarshal([]byte(text), &t) == nil {
		rep.Collectives = t.Kinds
	}
	return true
}

// StepStranded is the event of a collective stranded (Stranded), recorded
// with the failure it ends the job for.
const StepStranded = "stranded"

// Stranded says that the ranks of Node (or rank Rank of it, reported by
// its agent: NoRank when the root found the node stranding) ended
// without joining a collective other ranks wait in: collective Seq of
// epoch Epoch, Op (the root's finding; the agent's report knows neither).
type Stranded struct {
	Node  string `json:"node"`
	Rank  int    `json:"rank"`
	Seq   uint64 `json:"seq,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	Op    string `json:"op,omitempty"`
}

// Stranded records a stranded collective.
func (j *Journal) Stranded(s Stranded) { j.push(record{stranded: &s}) }

// analyzeStranded reads a stranded event into rep.Stranded; it reports
// whether ev was one.
func analyzeStranded(rep *Report, ev *raftstore.Event) bool {
	step, text := Step(ev)
	if ev.Kind != raftstore.EventLaunch || step != StepStranded {
		return false
	}
	var s Stranded
	if json.Unmarshal([]byte(text), &s) == nil {
		rep.Stranded = append(rep.Stranded, s)
	}
	return true
}
