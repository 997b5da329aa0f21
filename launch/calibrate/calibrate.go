package calibrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// Calibration is what launches over SSH measured of the launch-time
// model's parameters (docs/model.md): REM, the time one remote launch takes
// until the agent runs and has connected back, and SEQ, the time a parent
// needs between two successive launches. It is kept in the user's cache
// directory; `ftlaunch plan` and --tree auto use it.
//
// Seq and Rem are the medians of the window of the last launches'
// figures (Window, at most MaxWindow), the quantile the model uses; one
// launch's figure is too noisy to steer a tree (#33: REM swung 40 %
// between two launches in a row). RemSamples are the agents' own REM
// samples of those launches (at most MaxSamples), the distribution `plan
// --simulate` draws from. Shared, when set, is the contention term a
// separate calibration run measured; Auto is the tree --tree auto chose
// last, which it keeps unless a new choice is better by more than the
// calibration's noise.
type Calibration struct {
	Seq        float64   `json:"seq_seconds"`
	Rem        float64   `json:"rem_seconds"`
	Agents     int       `json:"agents"`
	Measured   time.Time `json:"measured"`
	Window     []Figure  `json:"window,omitempty"`
	RemSamples []float64 `json:"rem_samples,omitempty"`
	Shared     *Shared   `json:"shared,omitempty"`
	Auto       *Choice   `json:"auto,omitempty"`
}

// Figure is one launch's SEQ and REM (Measure).
type Figure struct {
	Seq float64 `json:"seq_seconds"`
	Rem float64 `json:"rem_seconds"`
	// Hand is the launch's median handoff (an agent up to it starting
	// its children); 0: none measured (no agent had children).
	Hand     float64   `json:"hand_seconds,omitempty"`
	Agents   int       `json:"agents"`
	Measured time.Time `json:"measured"`
}

// Shared is the contention term of the model, measured by a calibration
// run of its own (chaos/validate-model.sh): launches share Cores CPUs
// (the hosts share one machine's, as on the emulated cluster), each
// launch using Work CPU-seconds of them, each agent After more once it is
// up, PerRank more for each rank it starts then, and Rate cores from then
// until the launch ends (plan.Shared). Rem
// and Seq are that run's uncontended figures: a lone launch's REM, the
// parent's serial part beyond the shared CPU and the handoff (a chain's).
type Shared struct {
	Cores    int       `json:"cores"`
	Work     float64   `json:"work_seconds"`
	Rem      float64   `json:"rem_seconds"`
	Seq      float64   `json:"seq_seconds"`
	Hand     float64   `json:"hand_seconds,omitempty"`
	After    float64   `json:"work_after_seconds,omitempty"`
	PerRank  float64   `json:"work_per_rank_seconds,omitempty"`
	Rate     float64   `json:"work_rate,omitempty"`
	Measured time.Time `json:"measured"`
}

// Plan is the term as the model takes it for a launch of ranksPerAgent
// ranks on each agent (the mean): an agent's work once up is After plus
// its ranks' start, PerRank each.
func (s *Shared) Plan(ranksPerAgent float64) plan.Shared {
	return plan.Shared{Cores: s.Cores, Work: s.Work, After: s.After + s.PerRank*ranksPerAgent, Rate: s.Rate}
}

// Choice is the tree --tree auto chose for a launch of Nodes nodes: Tree
// is a plan kind ("auto" for the greedy tree shaped by Seq and Rem).
type Choice struct {
	Nodes int     `json:"nodes"`
	Tree  string  `json:"tree"`
	Seq   float64 `json:"shape_seq"`
	Rem   float64 `json:"shape_rem"`
}

// Bounds of a kept calibration.
const (
	MaxWindow  = 16  // launches whose figures are kept
	MaxSamples = 512 // agents' REM samples kept
)

// Add folds one launch's figure and its agents' REM samples into c (the
// oldest beyond the bounds are dropped) and sets Seq and Rem to the
// window's medians.
func (c *Calibration) Add(f Figure, rems []float64) {
	if len(c.Window) == 0 && c.Rem > 0 { // a file from before the window
		c.Window = []Figure{{Seq: c.Seq, Rem: c.Rem, Agents: c.Agents, Measured: c.Measured}}
	}
	c.Window = append(c.Window, f)
	if k := len(c.Window) - MaxWindow; k > 0 {
		c.Window = slices.Delete(c.Window, 0, k)
	}
	c.RemSamples = append(c.RemSamples, rems...)
	if k := len(c.RemSamples) - MaxSamples; k > 0 {
		c.RemSamples = slices.Delete(c.RemSamples, 0, k)
	}
	c.Seq, c.Rem = c.SeqQuantile(0.5), c.RemQuantile(0.5)
	c.Agents, c.Measured = f.Agents, f.Measured
}

// RemQuantile and SeqQuantile are the q-quantiles (0 <= q <= 1, linear
// between the order statistics) of the window's figures; a calibration
// without a window has its one figure. A launch of one agent measured
// no SEQ: SeqQuantile skips it (and is the kept Seq if all were such).
func (c *Calibration) RemQuantile(q float64) float64 {
	return c.quantile(q, func(f Figure) float64 { return f.Rem }, c.Rem)
}

func (c *Calibration) SeqQuantile(q float64) float64 {
	var xs []float64
	for _, f := range c.Window {
		if f.Agents > 1 {
			xs = append(xs, f.Seq)
		}
	}
	if len(xs) == 0 {
		return c.Seq
	}
	return Quantile(xs, q)
}

// HandQuantile is the q-quantile of the handoffs of the window's
// launches that measured one (0 if none did).
func (c *Calibration) HandQuantile(q float64) float64 {
	var xs []float64
	for _, f := range c.Window {
		if f.Hand > 0 {
			xs = append(xs, f.Hand)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return Quantile(xs, q)
}

func (c *Calibration) quantile(q float64, of func(Figure) float64, one float64) float64 {
	if len(c.Window) == 0 {
		return one
	}
	xs := make([]float64, len(c.Window))
	for i, f := range c.Window {
		xs[i] = of(f)
	}
	return Quantile(xs, q)
}

// Noise is the calibration's relative spread: the interquartile range of
// the window's REM over its median, at least MinNoise (a window of one or
// two launches says nothing of its noise).
func (c *Calibration) Noise() float64 {
	m := c.RemQuantile(0.5)
	if m <= 0 || len(c.Window) < 3 {
		return MinNoise
	}
	return max(MinNoise, (c.RemQuantile(0.75)-c.RemQuantile(0.25))/m)
}

// MinNoise is the least relative noise a calibration is taken to have.
const MinNoise = 0.10

// Quantile is the q-quantile of xs (linear interpolation between order
// statistics; xs is not modified); NaN for no xs.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	q = min(max(q, 0), 1)
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo == len(s)-1 {
		return s[lo]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

// CalibrationPath is where the calibration of launches by launcher
// ("ssh" or "slurm": each has its own costs) is kept:
// $XDG_CACHE_HOME/ftlaunch/calibration.json for ssh (or ~/.cache/...),
// calibration-LAUNCHER.json for the others.
func CalibrationPath(launcher string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("calibration: %w", err)
	}
	name := "calibration.json"
	if launcher != "" && launcher != "ssh" {
		name = "calibration-" + launcher + ".json"
	}
	return filepath.Join(dir, "ftlaunch", name), nil
}

// LoadCalibration reads the kept calibration; it returns nil and no error
// when there is none.
func LoadCalibration(launcher string) (*Calibration, error) {
	p, err := CalibrationPath(launcher)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	var c Calibration
	if err := json.Unmarshal(b, &c); err != nil || c.Seq < 0 || c.Rem <= 0 || !c.valid() {
		return nil, fmt.Errorf("calibration %s: not a calibration (%v); remove it", p, err)
	}
	return &c, nil
}

// SaveCalibration keeps c, replacing the file atomically.
func SaveCalibration(launcher string, c Calibration) (string, error) {
	p, err := CalibrationPath(launcher)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("calibration: %w", err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".calibration-*")
	if err != nil {
		return "", fmt.Errorf("calibration: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", fmt.Errorf("calibration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("calibration: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", fmt.Errorf("calibration: %w", err)
	}
	return p, nil
}

// Measure derives SEQ and REM from one launcher's children in one launch. up[i] is when agent i had
// connected back and queued[i] how long its launch waited for a slot, both
// from the moment the launches began. REM is the fastest launch (the one
// least slowed by the others); SEQ is the mean gap between successive
// agents coming up, the serial part of launching them all from one parent.
func Measure(up, queued []time.Duration) (Calibration, bool) {
	if len(up) == 0 || len(up) != len(queued) {
		return Calibration{}, false
	}
	rem := up[0] - queued[0]
	for i := range up {
		rem = min(rem, up[i]-queued[i])
	}
	c := Calibration{Rem: rem.Seconds(), Agents: len(up), Measured: time.Now().UTC()}
	if len(up) > 1 {
		c.Seq = (slices.Max(up) - slices.Min(up)).Seconds() / float64(len(up)-1)
	}
	return c, rem > 0
}

// valid reports whether the window, samples and shared term hold usable
// figures.
func (c *Calibration) valid() bool {
	for _, f := range c.Window {
		if f.Seq < 0 || f.Rem <= 0 || f.Hand < 0 {
			return false
		}
	}
	for _, r := range c.RemSamples {
		if !(r > 0) {
			return false
		}
	}
	if s := c.Shared; s != nil && (s.Cores < 1 || s.Work < 0 || s.After < 0 || s.PerRank < 0 || s.Rate < 0 || s.Rem <= 0 || s.Seq < 0 || s.Hand < 0) {
		return false
	}
	return true
}
