package calibrate

import (
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

// Measure derives SEQ and REM from one launch. up[i] is when agent i had
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
