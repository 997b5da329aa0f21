package calibrate

import (
	"math"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	xs := []float64{0.5, 0.1, 0.3, 0.2, 0.4}
	for _, c := range []struct{ q, want float64 }{{0, 0.1}, {0.25, 0.2}, {0.5, 0.3}, {0.75, 0.4}, {1, 0.5}, {0.1, 0.14}} {
		if got := Quantile(xs, c.q); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	if xs[0] != 0.5 {
		t.Error("Quantile sorted its argument")
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("quantile of nothing")
	}
}

// TestWindow: the kept figures are the window's medians, its bounds
// drop the oldest, a file from before the window counts as one launch,
// and the noise is the REM window's relative spread, at least MinNoise.
func TestWindow(t *testing.T) {
	c := Calibration{Seq: 0.05, Rem: 0.9, Agents: 16} // an old file's
	now := time.Now()
	c.Add(Figure{Seq: 0.06, Rem: 0.3, Agents: 16, Measured: now}, []float64{0.3, 0.35})
	if len(c.Window) != 2 || math.Abs(c.Rem-0.6) > 1e-12 || math.Abs(c.Seq-0.055) > 1e-12 {
		t.Fatalf("after one launch: %+v", c)
	}
	if c.Noise() != MinNoise {
		t.Errorf("noise of two launches %v, want %v", c.Noise(), MinNoise)
	}
	for i := range 2 * MaxWindow {
		c.Add(Figure{Seq: 0.05, Rem: 0.4 + 0.01*float64(i%5), Agents: 16, Measured: now}, make([]float64, 40))
	}
	if len(c.Window) != MaxWindow || len(c.RemSamples) != MaxSamples {
		t.Fatalf("window %d, samples %d", len(c.Window), len(c.RemSamples))
	}
	if c.Rem != c.RemQuantile(0.5) || c.Rem < 0.4 || c.Rem > 0.44 || c.Seq != 0.05 {
		t.Errorf("kept %v, %v", c.Rem, c.Seq)
	}
	want := (c.RemQuantile(0.75) - c.RemQuantile(0.25)) / c.RemQuantile(0.5)
	if got := c.Noise(); got != max(want, MinNoise) {
		t.Errorf("noise %v, want %v", got, max(want, MinNoise))
	}
	// A launch of one agent measured no SEQ.
	c.Add(Figure{Seq: 0, Rem: 0.41, Agents: 1}, nil)
	if c.Seq != 0.05 {
		t.Errorf("SEQ %v after a launch of one agent, want 0.05", c.Seq)
	}
	// Samples were zero: a kept file with them is refused.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, err := SaveCalibration("ssh", c); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCalibration("ssh"); err == nil {
		t.Error("a calibration with zero REM samples was loaded")
	}
	c.RemSamples = []float64{0.3}
	c.Shared = &Shared{Cores: 2, Work: 0.02, Rem: 0.05, Seq: 0.001}
	c.Auto = &Choice{Nodes: 17, Tree: "kary:4"}
	if _, err := SaveCalibration("ssh", c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration("ssh")
	if err != nil || got == nil || *got.Shared != *c.Shared || *got.Auto != *c.Auto || len(got.Window) != MaxWindow {
		t.Fatalf("load after save: %+v, %v", got, err)
	}
}
