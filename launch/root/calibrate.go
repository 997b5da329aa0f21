package root

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Calibration is what a launch over SSH measured of the launch-time
// model's parameters (docs/model.md): REM, the time one remote launch takes
// until the agent runs and has connected back, and SEQ, the time a parent
// needs between two successive launches. It is kept in the user's cache
// directory; `ftlaunch plan` uses it for the auto tree.
type Calibration struct {
	Seq      float64   `json:"seq_seconds"`
	Rem      float64   `json:"rem_seconds"`
	Agents   int       `json:"agents"`
	Measured time.Time `json:"measured"`
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
	if err := json.Unmarshal(b, &c); err != nil || c.Seq < 0 || c.Rem <= 0 {
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

// measure derives SEQ and REM from one launch. up[i] is when agent i had
// connected back and queued[i] how long its launch waited for a slot, both
// from the moment the launches began. REM is the fastest launch (the one
// least slowed by the others); SEQ is the mean gap between successive
// agents coming up, the serial part of launching them all from one parent.
func measure(up, queued []time.Duration) (Calibration, bool) {
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
	var total Calibration
	gaps := 0
	for _, g := range groups {
		var up, queued []time.Duration
		for _, a := range g {
			up = append(up, a.info.Up)
			queued = append(queued, a.info.Queued)
		}
		c, ok := measure(up, queued)
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
	p, err := SaveCalibration(fe.opts.Launcher, total)
	if err != nil {
		fe.warnf("%v", err)
		return
	}
	fe.verbosef("calibration: REM %.3f s, SEQ %.3f s from %d agents (kept in %s; ftlaunch plan --calibrated --launcher %s shows it)", total.Rem, total.Seq, total.Agents, p, cmp.Or(fe.opts.Launcher, "ssh"))
}
