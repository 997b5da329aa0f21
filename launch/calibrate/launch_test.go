package calibrate

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// TestSamples: each agent's REM (its launcher's time less its queueing),
// SEQ (the gap since its previous sibling) and handoff (its children's
// earliest launch start at the root less its own time up) as the state
// log keeps them.
func TestSamples(t *testing.T) {
	ms := time.Millisecond
	starts := []Start{
		{Node: "a0", Parent: -1, Up: 100 * ms, Queued: 10 * ms, UpAt: 150 * ms}, // under the root; launches a2 and a3
		{Node: "a1", Parent: -1, Up: 120 * ms, UpAt: 170 * ms},                  // under the root
		{Node: "a2", Parent: 0, Up: 80 * ms, UpAt: 300 * ms},                    // under a0: a0 began launching at 220 ms
		{Node: "a3", Parent: 0, Up: 90 * ms, Queued: 5 * ms, UpAt: 305 * ms},    // under a0: at 215 ms by its report
	}
	want := map[string]journal.AgentSample{
		"a0": {Node: "a0", Parent: journal.RootName, Rem: 0.090, Hand: 0.065},
		"a1": {Node: "a1", Parent: journal.RootName, Rem: 0.120, Seq: 0.020},
		"a2": {Node: "a2", Parent: "a0", Rem: 0.080},
		"a3": {Node: "a3", Parent: "a0", Rem: 0.085, Seq: 0.010},
	}
	got := Samples(starts)
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
	if m := Measured(starts, 50*ms); !near(m.MeasuredSeconds, 0.255) || len(m.Agents) != len(starts) {
		t.Errorf("measured %+v, want 0.255 s (last up at 305 ms, began at 50 ms) over %d agents", m, len(starts))
	}
}

// TestMeasureAndKeep: a launch's figures are measured, saved and loaded
// back; Keep adds a launch's to the kept calibration.
func TestMeasureAndKeep(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if c, err := LoadCalibration("ssh"); c != nil || err != nil {
		t.Fatalf("empty cache: %v, %v", c, err)
	}
	ms := time.Millisecond
	c, ok := Measure([]time.Duration{100 * ms, 140 * ms, 180 * ms}, []time.Duration{0, 20 * ms, 70 * ms})
	if !ok || c.Agents != 3 {
		t.Fatalf("measure: %+v %v", c, ok)
	}
	if want := 0.1; c.Rem < want-1e-9 || c.Rem > want+1e-9 { // min(100, 120, 110) ms
		t.Errorf("REM %v, want %v", c.Rem, want)
	}
	if want := 0.04; c.Seq < want-1e-9 || c.Seq > want+1e-9 { // (180-100)/2 ms
		t.Errorf("SEQ %v, want %v", c.Seq, want)
	}
	if _, err := SaveCalibration("ssh", c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration("ssh")
	if err != nil || got == nil || got.Rem != c.Rem || got.Seq != c.Seq {
		t.Fatalf("load after save: %+v, %v", got, err)
	}
	if _, ok := Measure(nil, nil); ok {
		t.Error("measure of no agents succeeded")
	}
	if k, err := Keep("slurm", nil, nil); k != nil || err != nil {
		t.Errorf("kept a launch of no agents: %+v, %v", k, err)
	}
	starts := []Start{{Node: "a0", Parent: -1, Up: 100 * ms}, {Node: "a1", Parent: -1, Up: 140 * ms}}
	k, err := Keep("slurm", starts, &Choice{Nodes: 2, Tree: "flat"})
	if err != nil || k == nil {
		t.Fatalf("keep: %+v, %v", k, err)
	}
	if k.Launch.Agents != 2 || math.Abs(k.Launch.Rem-0.1) > 1e-9 || math.Abs(k.Launch.Seq-0.04) > 1e-9 {
		t.Errorf("this launch's figures %+v, want REM 0.1 s, SEQ 0.04 s from 2 agents", k.Launch)
	}
	back, err := LoadCalibration("slurm")
	if err != nil || back == nil || len(back.Window) != 1 || back.Auto == nil || back.Auto.Tree != "flat" {
		t.Errorf("kept calibration %+v, %v: want one launch in its window and auto's choice", back, err)
	}
	if got, want := k.Summary("slurm"), "REM 0.100 s, SEQ 0.040 s from 2 agents; kept REM 0.100 s (p50 of 1 launches"; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "--launcher slurm shows it)") {
		t.Errorf("summary %q, want it to begin %q and name the launcher", got, want)
	}
}

// TestCompared: the model's prediction beside the measurement, with the
// shared CPU's term when the model had one.
func TestCompared(t *testing.T) {
	p := journal.ModelPrediction{Tree: "flat", PredictedSeconds: 0.5, Seq: 0.01, Rem: 0.2, Hand: 0.003, Source: "defaults"}
	m := journal.ModelMeasured{MeasuredSeconds: 0.75}
	if got, want := Compared(p, m), "predicted 0.500 s, measured 0.750 s (flat tree; seq 0.010 s, rem 0.200 s, handoff 0.003 s from defaults)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	p.Cores, p.Work, p.After, p.Rate = 2, 1.5, 0.044, 0.25
	if got := Compared(p, m); !strings.HasSuffix(got, "defaults; shared CPU: 2 cores, work 1.500 s, after 0.044 s, rate 0.250)") {
		t.Errorf("with a shared CPU: %q", got)
	}
}

// TestBreakdown: one line for the root and one per agent with children,
// over its children's starts; an agent whose ranks run says how long
// after its job arrived.
func TestBreakdown(t *testing.T) {
	ms := time.Millisecond
	starts := []Start{
		{Node: "a0", Parent: -1, Up: 100 * ms, Queued: 10 * ms, Spawn: 40 * ms, Init: 3 * ms, Spec: 200 * ms, Running: 250 * ms},
		{Node: "a1", Parent: -1, Up: 120 * ms, Spawn: 60 * ms},
		{Node: "a2", Parent: 0, Up: 80 * ms, Queued: 5 * ms, Spawn: 20 * ms},
	}
	got := Breakdown(starts, 2*ms, "ssh")
	want := []string{
		"launcher front-end: init 2.0 ms; 2 child(ren): ssh 50.0 ms mean, 60.0 ms max (10.0 ms queued max); all connected 120.0 ms after it began launching",
		"launcher a0: init 3.0 ms; 1 child(ren): ssh 20.0 ms mean, 20.0 ms max (5.0 ms queued max); all connected 80.0 ms after it began launching; its ranks running 50.0 ms after its job arrived",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Breakdown:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestModelForRanks: with a calibration run's term kept, an agent's work
// once up holds its ranks' start, PerRank for each of the launch's mean
// ranks per agent, in the forecast and in what the state log keeps.
func TestModelForRanks(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	sh := &Shared{Cores: 2, Work: 0.2, After: 0.01, PerRank: 0.03, Rate: 0.02, Rem: 0.15, Hand: 0.008, Measured: time.Now()}
	if _, err := SaveCalibration("ssh", Calibration{Seq: 0.01, Rem: 0.15, Shared: sh}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n, ranks int
		after    float64
	}{
		{n: 33, ranks: 128, after: 0.01 + 4*0.03}, // 32 agents x 4 ranks
		{n: 33, ranks: 32, after: 0.01 + 0.03},
		{n: 5, ranks: 6, after: 0.01 + 1.5*0.03}, // the mean
		{n: 1, ranks: 0, after: 0.01 + 0.03},     // no agents: as one rank
	} {
		m, err := ModelFor("ssh", false, c.n, c.ranks)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(m.F.Shared.After-c.after) > 1e-12 || math.Abs(m.Pred.After-c.after) > 1e-12 || m.F.Shared.Work != 0.2 || m.F.Shared.Rate != 0.02 {
			t.Errorf("%d nodes, %d ranks: forecast %+v, kept after %v; want after %v", c.n, c.ranks, m.F.Shared, m.Pred.After, c.after)
		}
	}
	bad := *sh
	bad.PerRank = -1
	if _, err := SaveCalibration("ssh", Calibration{Seq: 0.01, Rem: 0.15, Shared: &bad}); err == nil {
		if k, err := LoadCalibration("ssh"); err == nil && k != nil && k.Shared != nil {
			t.Errorf("a negative per-rank work was loaded: %+v", k.Shared)
		}
	}
}

// TestLaunchPlanAndDone: a launch on test nodes is planned under the
// local model with its prediction; once up it is measured for the state
// log, said beside the prediction with its breakdown, and kept in the
// calibration only when the launch keeps it (a kept one is said).
func TestLaunchPlanAndDone(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var warned, said []string
	l := Launch{Launcher: "ssh", StartedBy: "ssh", Local: true, Ranks: 2,
		Warnf:    func(f string, a ...any) { warned = append(warned, fmt.Sprintf(f, a...)) },
		Verbosef: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	flat, _ := plan.ParseKind("flat")
	p, err := l.Plan(flat, 3, plan.Params{Replicas: 1})
	if err != nil || p.Plan == nil || p.Pred.Source != "test-nodes" || p.Pred.Tree != "flat" || p.Prediction() != &p.Pred {
		t.Fatalf("plan %+v, %v: want a flat plan with the test nodes' prediction", p, err)
	}
	if (*Planned)(nil).Prediction() != nil {
		t.Error("no plan has a prediction")
	}
	ms := time.Millisecond
	starts := []Start{{Node: "a0", Parent: -1, Up: 100 * ms, UpAt: 150 * ms}, {Node: "a1", Parent: -1, Up: 140 * ms, UpAt: 190 * ms}}
	for _, keep := range []bool{false, true} {
		warned, said = nil, nil
		l.Keep = keep
		m := l.Done(p, starts, 40*ms)
		if math.Abs(m.MeasuredSeconds-0.15) > 1e-9 || len(m.Agents) != 2 {
			t.Errorf("keep %v: measured %+v, want 0.15 s over 2 agents", keep, m)
		}
		kept, _ := LoadCalibration("ssh")
		want := 1 + len(Breakdown(starts, 40*ms, "ssh")) // the model's line, the breakdown
		if keep {
			want++ // and the calibration's
		}
		if len(warned) != 0 || len(said) != want || !strings.HasPrefix(said[0], "model: predicted") ||
			(kept != nil) != keep || keep != strings.HasPrefix(said[1], "calibration: ") {
			t.Errorf("keep %v: warned %q, said %q, kept %+v", keep, warned, said, kept)
		}
	}
}
