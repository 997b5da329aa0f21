package root

import (
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
)

func TestMeasureAndKeep(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if c, err := calibrate.LoadCalibration("ssh"); c != nil || err != nil {
		t.Fatalf("empty cache: %v, %v", c, err)
	}
	ms := time.Millisecond
	c, ok := calibrate.Measure([]time.Duration{100 * ms, 140 * ms, 180 * ms}, []time.Duration{0, 20 * ms, 70 * ms})
	if !ok || c.Agents != 3 {
		t.Fatalf("measure: %+v %v", c, ok)
	}
	if want := 0.1; c.Rem < want-1e-9 || c.Rem > want+1e-9 { // min(100, 120, 110) ms
		t.Errorf("REM %v, want %v", c.Rem, want)
	}
	if want := 0.04; c.Seq < want-1e-9 || c.Seq > want+1e-9 { // (180-100)/2 ms
		t.Errorf("SEQ %v, want %v", c.Seq, want)
	}
	if _, err := calibrate.SaveCalibration("ssh", c); err != nil {
		t.Fatal(err)
	}
	got, err := calibrate.LoadCalibration("ssh")
	if err != nil || got == nil || got.Rem != c.Rem || got.Seq != c.Seq {
		t.Fatalf("load after save: %+v, %v", got, err)
	}
	if _, ok := calibrate.Measure(nil, nil); ok {
		t.Error("measure of no agents succeeded")
	}
}
