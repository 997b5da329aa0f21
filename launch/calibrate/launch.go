package calibrate

// One launch and the model: what the root fixes before it starts its
// agents (Model, Plan: the model's inputs and the tree with its
// prediction) and what it measures and keeps once every agent is up
// (Samples, Measured, Keep).

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/journal"
	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// The launch-time model's parameters for test nodes (agents started as
// local processes): a fork and exec per child, and about 10 ms until an
// agent runs and has connected back (--verbose on the 2-core development
// machine: 0.5-3 ms per start, connected 8-12 ms after its launcher began).
const (
	localSeq = time.Millisecond
	localRem = 10 * time.Millisecond
)

// Start is one agent's start as the root saw it: Up, Queued and Spawn as
// its launcher measured them (connected back, and left the spawner's
// queue, after the launcher began; how long its spawner took), Init how
// long it took to begin launching its own children; UpAt when the root
// activated it, Spec when its job was sent and Ranks when its ranks were
// reported running (0: not yet), from the root's start. Parent is its
// parent's index among the starts (-1: the root).
type Start struct {
	Node                string
	Parent              int
	Up, Queued, Spawn   time.Duration
	Init                time.Duration
	UpAt, Spec, Running time.Duration
}

// groups are the starts by parent, the parents in the order they first
// appear.
func groups(starts []Start) (map[int][]int, []int) {
	by := map[int][]int{}
	var parents []int
	for i, s := range starts {
		if by[s.Parent] == nil {
			parents = append(parents, s.Parent)
		}
		by[s.Parent] = append(by[s.Parent], i)
	}
	return by, parents
}

// Breakdown is the launch's breakdown per launching agent, one line each,
// for --verbose: the root's (began: when it began launching) and each
// agent's with children, over its children's starts by startedBy (the
// launcher's name, launcher.Agents.StartedBy).
func Breakdown(starts []Start, began time.Duration, startedBy string) []string {
	by, _ := groups(starts)
	var out []string
	line := func(name string, init time.Duration, kids []int, ranksAfter string) {
		if len(kids) == 0 {
			return
		}
		var sum, mx, q, last time.Duration
		for _, k := range kids {
			s := starts[k]
			sum += s.Spawn
			mx, q, last = max(mx, s.Spawn), max(q, s.Queued), max(last, s.Up)
		}
		out = append(out, fmt.Sprintf("launcher %s: init %.1f ms; %d child(ren): %s %.1f ms mean, %.1f ms max (%.1f ms queued max); all connected %.1f ms after it began launching%s",
			name, ms(init), len(kids), startedBy, ms(sum/time.Duration(len(kids))), ms(mx), ms(q), ms(last), ranksAfter))
	}
	line("front-end", began, by[-1], "")
	for i, s := range starts {
		ranks := ""
		if s.Running > 0 {
			ranks = fmt.Sprintf("; its ranks running %.1f ms after its job arrived", ms(s.Running-s.Spec))
		}
		line(s.Node, s.Init, by[i], ranks)
	}
	return out
}

func ms(d time.Duration) float64 { return d.Seconds() * 1e3 }

// Samples is each agent's launch as its launcher measured it: REM from
// leaving the spawner's queue until connected back, SEQ the gap since its
// previous sibling connected back (0 for the first), and the handoff of an
// agent with children: when it began launching (its children's reports
// less their times since then, the earliest) less when it was up.
func Samples(starts []Start) []journal.AgentSample {
	by, parents := groups(starts)
	out := make([]journal.AgentSample, 0, len(starts))
	began := map[int]time.Duration{}
	for _, p := range parents {
		if p < 0 {
			continue
		}
		for _, c := range by[p] {
			if b := starts[c].UpAt - starts[c].Up; began[p] == 0 || b < began[p] {
				began[p] = b
			}
		}
	}
	for _, p := range parents {
		g := slices.Clone(by[p])
		slices.SortStableFunc(g, func(a, b int) int { return cmp.Compare(starts[a].Up, starts[b].Up) })
		parent := journal.RootName
		if p >= 0 {
			parent = starts[p].Node
		}
		for i, x := range g {
			a := starts[x]
			s := journal.AgentSample{Node: a.Node, Parent: parent, Rem: (a.Up - a.Queued).Seconds()}
			if i > 0 {
				s.Seq = (a.Up - starts[g[i-1]].Up).Seconds()
			}
			if b, ok := began[x]; ok && b > a.UpAt {
				s.Hand = (b - a.UpAt).Seconds()
			}
			out = append(out, s)
		}
	}
	return out
}

// Measured is the launch as measured, from its start (began, from the
// root's start) until the last agent connected back, with each agent's
// sample.
func Measured(starts []Start, began time.Duration) journal.ModelMeasured {
	var last time.Duration
	for _, s := range starts {
		last = max(last, s.UpAt)
	}
	return journal.ModelMeasured{MeasuredSeconds: (last - began).Seconds(), Agents: Samples(starts)}
}

// Kept is what Keep kept: this launch's figures (Launch) and the kept
// calibration they were added to (Kept), in the file Path.
type Kept struct {
	Launch Calibration
	Kept   *Calibration
	Path   string
}

// Summary says what k kept for launcher ("": ssh), for --verbose: this
// launch's figures, the kept ones and where they are.
func (k *Kept) Summary(launcher string) string {
	total, kept := k.Launch, k.Kept
	return fmt.Sprintf("REM %.3f s, SEQ %.3f s from %d agents; kept REM %.3f s (p50 of %d launches, p25-p75 %.3f-%.3f s), SEQ %.3f s (in %s; ftlaunch plan --calibrated --launcher %s shows it)",
		total.Rem, total.Seq, total.Agents, kept.Rem, len(kept.Window), kept.RemQuantile(0.25), kept.RemQuantile(0.75), kept.Seq, k.Path, cmp.Or(launcher, "ssh"))
}

// Compared sets a launch's measurement (m) beside the model's prediction
// of it (p), for --verbose.
func Compared(p journal.ModelPrediction, m journal.ModelMeasured) string {
	shared := ""
	if p.Cores > 0 {
		shared = fmt.Sprintf("; shared CPU: %d cores, work %.3f s, after %.3f s, rate %.3f", p.Cores, p.Work, p.After, p.Rate)
	}
	return fmt.Sprintf("predicted %.3f s, measured %.3f s (%s tree; seq %.3f s, rem %.3f s, handoff %.3f s from %s%s)",
		p.PredictedSeconds, m.MeasuredSeconds, p.Tree, p.Seq, p.Rem, p.Hand, p.Source, shared)
}

// Keep measures this launch from every launcher's starts and adds it to
// the calibration kept for launcher ("ssh" or "slurm"): REM is the
// fastest start of all; SEQ the mean of each launcher's, weighted by its
// gaps; the handoff the median of the agents'. auto, if set, is the tree
// --tree auto chose, kept with it. Nil and no error: no launcher's starts
// could be measured.
func Keep(launcher string, starts []Start, auto *Choice) (*Kept, error) {
	by, _ := groups(starts)
	var total Calibration
	gaps := 0
	var rems []float64
	for _, g := range by {
		var up, queued []time.Duration
		for _, x := range g {
			a := starts[x]
			up = append(up, a.Up)
			queued = append(queued, a.Queued)
			if r := (a.Up - a.Queued).Seconds(); r > 0 {
				rems = append(rems, r)
			}
		}
		c, ok := Measure(up, queued)
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
		return nil, nil
	}
	if gaps > 0 {
		total.Seq /= float64(gaps)
	}
	// The kept calibration as it is now (another launch may have added
	// to it since this one began), with this launch's figure added.
	kept, err := LoadCalibration(launcher)
	if err != nil || kept == nil {
		kept = &Calibration{}
	}
	var hands []float64
	for _, s := range Samples(starts) {
		if s.Hand > 0 {
			hands = append(hands, s.Hand)
		}
	}
	fig := Figure{Seq: total.Seq, Rem: total.Rem, Agents: total.Agents, Measured: total.Measured}
	if len(hands) > 0 {
		fig.Hand = Quantile(hands, 0.5)
	}
	kept.Add(fig, rems)
	if auto != nil {
		kept.Auto = auto
	}
	p, err := SaveCalibration(launcher, *kept)
	if err != nil {
		return nil, err
	}
	return &Kept{Launch: total, Kept: kept, Path: p}, nil
}

// Model is what the launch-time model takes for one launch: F, its
// parameters, and Pred, the figures the state log keeps with the
// prediction; Noise is the calibration's, Prev auto's last choice for as
// many nodes, Kept the calibration (nil: none).
type Model struct {
	F     plan.Forecast
	Pred  journal.ModelPrediction
	Noise float64
	Prev  *plan.Choice
	Kept  *Calibration
}

// ModelFor is the model for a launch of n nodes (the root included) and
// ranks ranks: for test nodes (local)
// a local process start, else the calibration kept for launcher before
// this launch (never refitted on it: its window's medians, and its
// shared-CPU term if a calibration run measured one), else the model's
// defaults. An error says what went wrong reading the kept calibration
// (with none read, the model is the defaults).
func ModelFor(launcher string, local bool, n, ranks int) (Model, error) {
	if local {
		// Test nodes: a local process start, not the model's defaults
		// (which are a remote launch's and made a deeper tree, 3-4x
		// slower for a few test nodes).
		f := plan.Forecast{Seq: localSeq.Seconds(), Rem: localRem.Seconds()}
		return Model{F: f, Pred: journal.ModelPrediction{Seq: f.Seq, Rem: f.Rem, Source: "test-nodes"}, Noise: MinNoise}, nil
	}
	k, err := LoadCalibration(launcher)
	if k == nil {
		f := plan.Forecast{Seq: plan.DefaultSeq, Rem: plan.DefaultRem}
		return Model{F: f, Pred: journal.ModelPrediction{Seq: f.Seq, Rem: f.Rem, Source: "defaults"}, Noise: MinNoise}, err
	}
	m := Model{Kept: k, Noise: k.Noise()}
	m.F = plan.Forecast{Seq: k.SeqQuantile(0.5), Rem: k.RemQuantile(0.5), Hand: k.HandQuantile(0.5)}
	m.Pred = journal.ModelPrediction{Source: "calibration", Quantile: 0.5, RemLow: k.RemQuantile(0.25), RemHigh: k.RemQuantile(0.75), Launches: max(len(k.Window), 1)}
	if sh := k.Shared; sh != nil {
		// A machine whose hosts share its CPUs: the calibration run's
		// uncontended figures and its contention term.
		// An agent's work once up holds its ranks' start (PerRank
		// each): the mean over the agents.
		perAgent := 1.0
		if n > 1 && ranks > 0 {
			perAgent = float64(ranks) / float64(n-1)
		}
		m.F = plan.Forecast{Seq: sh.Seq, Rem: sh.Rem, Hand: sh.Hand, Shared: sh.Plan(perAgent)}
		m.Pred.Source, m.Pred.Cores, m.Pred.Work, m.Pred.After, m.Pred.Rate = "calibration run", sh.Cores, sh.Work, m.F.Shared.After, sh.Rate
	}
	m.Pred.Seq, m.Pred.Rem, m.Pred.Hand = m.F.Seq, m.F.Rem, m.F.Hand
	if a := k.Auto; a != nil && a.Nodes == n {
		m.Prev = &plan.Choice{Tree: a.Tree, Seq: a.Seq, Rem: a.Rem}
	}
	return m, err
}

// Planned is a launch plan with the model's prediction of its launch
// (from its start until the last agent connected back); Auto is the tree
// --tree auto chose, to keep with the calibration (nil: another kind, or
// no calibration), Why how it chose.
type Planned struct {
	Plan *plan.Plan
	Pred journal.ModelPrediction
	Auto *Choice
	Why  string
}

// Prediction is p's prediction of its launch, as the state log keeps it
// with the plan (nil: no plan, none).
func (p *Planned) Prediction() *journal.ModelPrediction {
	if p == nil {
		return nil
	}
	return &p.Pred
}

// Plan builds the launch plan of kind over n nodes under model m, auto's
// by plan.ChooseAuto, and fixes the model's prediction for it.
func Plan(kind plan.Kind, n int, params plan.Params, m Model) (Planned, error) {
	out := Planned{Pred: m.Pred}
	if kind.Shape == plan.Auto {
		ch, err := plan.ChooseAuto(n, m.F, params, m.Prev, m.Noise)
		if err != nil {
			return out, err
		}
		out.Plan, out.Pred.PredictedSeconds, out.Pred.Choice, out.Why = ch.Plan, ch.Predicted, ch.Why, ch.Why
		if m.Kept != nil {
			out.Auto = &Choice{Nodes: n, Tree: ch.Choice.Tree, Seq: ch.Choice.Seq, Rem: ch.Choice.Rem}
		}
	} else {
		var err error
		if out.Plan, err = plan.Build(kind, n, params); err != nil {
			return out, err
		}
		if out.Pred.PredictedSeconds, err = out.Plan.Predict(m.F); err != nil {
			return out, err
		}
	}
	out.Pred.Tree = out.Plan.Kind.String()
	return out, nil
}

// Launch is how one launch meets the model, as the root starts it: its
// agents' launcher (ssh or slurm: launcher.Agents.Launcher, StartedBy),
// on test nodes or not (Local), for Ranks ranks; whether this launch adds
// to the kept calibration (Keep: SSH and srun launches that start agents
// one by one); and where the root's messages go (Verbosef says nothing
// without --verbose).
type Launch struct {
	Launcher, StartedBy string
	Local, Keep         bool
	Ranks               int
	Warnf, Verbosef     func(format string, args ...any)
}

// Plan builds the launch plan of kind over n nodes (the root included)
// under the model for this launch (ModelFor, whose defaults stand in for
// a calibration that could not be read: said) and fixes its prediction
// (Plan); how auto chose is said with --verbose.
func (l Launch) Plan(kind plan.Kind, n int, params plan.Params) (*Planned, error) {
	m, err := ModelFor(l.Launcher, l.Local, n, l.Ranks)
	if err != nil {
		l.Warnf("launch model: %v (using its defaults)", err)
	}
	p, err := Plan(kind, n, params, m)
	if err != nil {
		return nil, err
	}
	if p.Why != "" {
		l.Verbosef("auto %s", p.Why)
	}
	return &p, nil
}

// Done takes the launch planned as p once every agent is up: it measures
// it from its start (began) until the last agent connected back, with
// each agent's SEQ and REM (Measured: the state log keeps it), says it
// beside the prediction, keeps it in the calibration (Keep: a failure to
// is said, not fatal), and says the breakdown per launching agent.
func (l Launch) Done(p *Planned, starts []Start, began time.Duration) journal.ModelMeasured {
	m := Measured(starts, began)
	l.Verbosef("model: %s", Compared(p.Pred, m))
	if l.Keep {
		if k, err := Keep(l.Launcher, starts, p.Auto); err != nil {
			l.Warnf("%v", err)
		} else if k != nil {
			l.Verbosef("calibration: %s", k.Summary(l.Launcher))
		}
	}
	for _, line := range Breakdown(starts, began, l.StartedBy) {
		l.Verbosef("%s", line)
	}
	return m
}
