package main

import (
	"encoding/json"
	"testing"
)

// TestLaunchChecksModel: a launch over test nodes keeps the model's
// prediction, fixed with its tree, beside what it measured (launch start
// to last agent connected), and each agent's REM sample, in the state log
// as inspect --json shows it.
func TestLaunchChecksModel(t *testing.T) {
	dir := t.TempDir()
	r := ftlaunch(t, "", "run", "--state-dir", dir, "--test-nodes", "4", "--tree", "kary:2", "-n", "4", "true")
	if r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	r = ftlaunch(t, "", "inspect", "--json", "--state-dir", dir)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		Model *struct {
			Tree      string  `json:"tree"`
			Predicted float64 `json:"predicted_seconds"`
			Measured  float64 `json:"measured_seconds"`
			Source    string  `json:"source"`
			Agents    []struct {
				Node string  `json:"node"`
				Rem  float64 `json:"rem_seconds"`
			} `json:"agents"`
		} `json:"model"`
		Agents []struct {
			Node string  `json:"node"`
			Rem  float64 `json:"rem_seconds"`
		} `json:"agents"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v", err)
	}
	m := rep.Model
	if m == nil {
		t.Fatalf("inspect --json has no model: %s", r.stdout)
	}
	if m.Tree != "kary:2" || m.Source != "test-nodes" || m.Predicted <= 0 || m.Measured <= 0 || m.Measured > 60 {
		t.Errorf("model %+v", *m)
	}
	if len(m.Agents) != 4 || len(rep.Agents) != 4 {
		t.Fatalf("%d agent samples, %d agents; want 4", len(m.Agents), len(rep.Agents))
	}
	for _, a := range rep.Agents {
		if a.Rem <= 0 {
			t.Errorf("agent %s: rem %v", a.Node, a.Rem)
		}
	}
}
