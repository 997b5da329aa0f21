package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/launch/calibrate"
)

// launchModel is the model part of inspect --json: the launch's
// prediction, fixed with its tree, beside what it measured (launch start
// to last agent connected), and each agent's sample.
type launchModel struct {
	Tree      string  `json:"tree"`
	Predicted float64 `json:"predicted_seconds"`
	Measured  float64 `json:"measured_seconds"`
	Source    string  `json:"source"`
	Agents    []struct {
		Node string  `json:"node"`
		Rem  float64 `json:"rem_seconds"`
	} `json:"agents"`
}

// checkLaunchModel checks the model that a launch of agents test nodes
// over a tree kind kept in its state log (TestRunKeepsStateLog's launch).
func checkLaunchModel(t *testing.T, m *launchModel, tree string, agents int) {
	t.Helper()
	if m == nil {
		t.Fatal("inspect --json has no model")
	}
	if m.Tree != tree || m.Source != "test-nodes" || m.Predicted <= 0 || m.Measured <= 0 || m.Measured > 60 {
		t.Errorf("model %+v", *m)
	}
	if len(m.Agents) != agents {
		t.Fatalf("%d agent samples, want %d", len(m.Agents), agents)
	}
	for _, a := range m.Agents {
		if a.Rem <= 0 {
			t.Errorf("agent %s: rem %v", a.Node, a.Rem)
		}
	}
}

// TestPlanKeptModel: a kept window gives plan its median and spread; a
// calibration run's shared-CPU term kept with --keep-shared makes the
// prediction slower than the model; --rem-median scales samples.
func TestPlanKeptModel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	plan := func(args ...string) map[string]any {
		t.Helper()
		var out, errb bytes.Buffer
		if code := planCommand(args, &out, &errb); code != 0 {
			t.Fatalf("plan %v: exit %d: %s", args, code, errb.String())
		}
		var v map[string]any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("plan %v: %v", args, err)
		}
		return v
	}
	c := calibrate.Calibration{}
	for _, rem := range []float64{0.3, 0.5, 0.4, 0.9, 0.45} {
		c.Add(calibrate.Figure{Seq: 0.05, Rem: rem, Agents: 16}, []float64{rem, rem + 0.1})
	}
	if _, err := calibrate.SaveCalibration("ssh", c); err != nil {
		t.Fatal(err)
	}
	v := plan("--nodes", "17", "--json")
	cal, _ := v["calibration"].(map[string]any)
	if v["rem"] != 0.45 || cal == nil || cal["launches"] != 5.0 || cal["rem_p25"] != 0.4 || cal["rem_p75"] != 0.5 || cal["shared"] != false {
		t.Errorf("plan from the kept window: rem %v, calibration %v", v["rem"], cal)
	}
	var out, errb bytes.Buffer
	if code := planCommand([]string{"--keep-shared", "--cores", "2", "--work", "0.03", "--seq", "0.001", "--rem", "0.06"}, &out, &errb); code != 0 {
		t.Fatalf("keep-shared: %d %s", code, errb.String())
	}
	v = plan("--nodes", "33", "--json")
	if v["cores"] != 2.0 || v["work_seconds"] != 0.03 || v["rem"] != 0.06 || !(v["predicted_seconds"].(float64) > v["modeled_seconds"].(float64)) {
		t.Errorf("plan with the shared term: %v", v)
	}
	if want := 32 * 0.03 / 2; v["predicted_seconds"].(float64) < want {
		t.Errorf("predicted %v, below the shared CPU's %v s of work for 32 launches", v["predicted_seconds"], want)
	}
	// The calibration run's inversion: the work that makes 12 flat
	// launches on 2 cores take 1.109 s, then the rate that makes a deep
	// tree over 24 take 2.5 s; kept, with the rate, for auto.
	v = plan("--nodes", "13", "--tree", "flat", "--cores", "2", "--rem", "0.11", "--seq", "0", "--hand", "0.007", "--fit", "work", "--measured", "1.109", "--json")
	fit, _ := v["fit"].(map[string]any)
	if fit == nil || fit["term"] != "work" || math.Abs(fit["value"].(float64)-1.109/6) > 1e-6 || math.Abs(v["predicted_seconds"].(float64)-1.109) > 1e-6 {
		t.Errorf("fit work: %v (predicted %v)", fit, v["predicted_seconds"])
	}
	work := strconv.FormatFloat(fit["value"].(float64), 'g', -1, 64)
	v = plan("--nodes", "25", "--tree", "kary:2", "--cores", "2", "--rem", "0.11", "--seq", "0", "--hand", "0.007", "--work", work, "--fit", "rate", "--measured", "2.5", "--json")
	fit, _ = v["fit"].(map[string]any)
	if fit == nil || !(fit["value"].(float64) > 0) || math.Abs(fit["predicted_seconds"].(float64)-2.5) > 1e-6 || v["work_rate"] != fit["value"] {
		t.Errorf("fit rate: %v (work_rate %v)", fit, v["work_rate"])
	}
	rate := strconv.FormatFloat(fit["value"].(float64), 'g', -1, 64)
	if code := planCommand([]string{"--keep-shared", "--cores", "2", "--work", work, "--work-rate", rate, "--seq", "0", "--rem", "0.11", "--hand", "0.007"}, &out, &errb); code != 0 {
		t.Fatalf("keep-shared: %d %s", code, errb.String())
	}
	v = plan("--nodes", "25", "--json")
	if v["work_rate"] != fit["value"] || v["auto_chose"] == "kary:2" {
		t.Errorf("auto with the kept rate: work_rate %v, chose %v", v["work_rate"], v["auto_chose"])
	}
	// The ranks' start: --work-per-rank P for each of --ppn K ranks is
	// K·P more of each agent's work once up (as --work-after K·P), the
	// hosts' mean slots with -H; kept with the calibration, and taken
	// back for a launch of as many ranks.
	perRank := func(args ...string) float64 {
		v := plan(append([]string{"--tree", "kary:4", "--cores", "2", "--rem", "0.15", "--seq", "0", "--work", "0.2", "--json"}, args...)...)
		return v["predicted_seconds"].(float64)
	}
	after := perRank("--nodes", "33", "--work-after", "0.12")
	if got := perRank("--nodes", "33", "--work-per-rank", "0.03", "--ppn", "4"); math.Abs(got-after) > 1e-9 {
		t.Errorf("--work-per-rank 0.03 --ppn 4 predicts %v, --work-after 0.12 %v", got, after)
	}
	hosts := make([]string, 32)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d:4", i)
	}
	if got := perRank("-H", strings.Join(hosts, ","), "--work-per-rank", "0.03"); math.Abs(got-after) > 1e-9 {
		t.Errorf("-H 32 hosts x 4 slots, --work-per-rank 0.03, predicts %v, want %v", got, after)
	}
	if one := perRank("--nodes", "33", "--work-per-rank", "0.03"); !(one < after) {
		t.Errorf("1 rank per node (%v) not faster than 4 (%v)", one, after)
	}
	f := filepath.Join(t.TempDir(), "rem.txt")
	if err := os.WriteFile(f, []byte("1\n2\n3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v = plan("--nodes", "2", "--tree", "flat", "--simulate", "--runs", "200", "--rem-samples", f, "--rem-median", "0.2", "--json")
	sim := v["simulation"].(map[string]any)
	if sim["min_seconds"] != 0.1 || sim["max_seconds"] != 0.30000000000000004 && sim["max_seconds"] != 0.3 {
		t.Errorf("samples 1, 2, 3 scaled to a median of 0.2: %v", sim)
	}
}
