package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ftlaunch/ftlaunch/topology/plan"
)

// runPlan calls planCommand with buffers.
func runPlan(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	// No calibration kept by other tests' launches: auto uses the defaults.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	var out, errb bytes.Buffer
	code = planCommand(args, &out, &errb)
	return code, out.String(), errb.String()
}

// planJSON is the part of the --json object the tests read.
type planJSON struct {
	Tree         string  `json:"tree"`
	Nodes        int     `json:"nodes"`
	Seq          float64 `json:"seq"`
	Rem          float64 `json:"rem"`
	Depth        int     `json:"depth"`
	MaxChildren  int     `json:"max_children"`
	Modeled      float64 `json:"modeled_seconds"`
	ReplicaNodes []int32 `json:"replica_nodes"`
	Simulation   *struct {
		Runs   int     `json:"runs"`
		Median float64 `json:"median_seconds"`
		P99    float64 `json:"p99_seconds"`
		Min    float64 `json:"min_seconds"`
		Max    float64 `json:"max_seconds"`
	} `json:"simulation"`
	Plan *struct {
		Parent []int32 `json:"parent"`
		Order  []int32 `json:"order"`
		Backup []int32 `json:"backup"`
	} `json:"plan"`
}

func decodePlanJSON(t *testing.T, s string) planJSON {
	t.Helper()
	var v planJSON
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", s)
	}
	return v
}

// modelByRecursion evaluates launch(T) = max launch(v) with
// launch(v) = launch(parent) + seq*(order-1) + rem, by plain recursion,
// and also returns depth and the largest fan-out.
func modelByRecursion(parent, order []int32, seq, rem float64) (worst float64, depth, fan int) {
	n := len(parent)
	kids := make([]int, n)
	var launch func(v int) (float64, int)
	launch = func(v int) (float64, int) {
		if parent[v] < 0 {
			return 0, 0
		}
		tp, dp := launch(int(parent[v]))
		return tp + seq*float64(order[v]-1) + rem, dp + 1
	}
	for v := range n {
		t, d := launch(v)
		worst, depth = max(worst, t), max(depth, d)
		if parent[v] >= 0 {
			kids[parent[v]]++
			fan = max(fan, kids[parent[v]])
		}
	}
	return worst, depth, fan
}

// TestPlanAcceptance: the modeled time printed for 1000 greedy nodes equals
// an independent evaluation of the model over the tree.
func TestPlanAcceptance(t *testing.T) {
	args := []string{"--nodes", "1000", "--seq", "0.007", "--rem", "0.172", "--tree", "greedy", "--json"}
	code, out, errs := runPlan(t, args...)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	got := decodePlanJSON(t, out)
	if got.Tree != "greedy" || got.Nodes != 1000 || got.Seq != 0.007 || got.Rem != 0.172 {
		t.Fatalf("header %+v", got)
	}
	// The returned tree: the same plan built through the library.
	pl, err := plan.Build(plan.Kind{Shape: plan.Greedy}, 1000, plan.Params{Seq: 0.007, Rem: 0.172})
	if err != nil {
		t.Fatal(err)
	}
	want, depth, fan := modelByRecursion(pl.Parent, pl.Order, 0.007, 0.172)
	if got.Modeled != want || got.Depth != depth || got.MaxChildren != fan {
		t.Fatalf("printed modeled %v depth %d fan-out %d; recursion %v %d %d", got.Modeled, got.Depth, got.MaxChildren, want, depth, fan)
	}
	// The printed tree, with --show.
	code, out, _ = runPlan(t, append(args, "--show")...)
	if code != 0 {
		t.Fatalf("--show: exit %d", code)
	}
	shown := decodePlanJSON(t, out)
	if shown.Plan == nil || len(shown.Plan.Parent) != 1000 || len(shown.Plan.Order) != 1000 || len(shown.Plan.Backup) != 1000 {
		t.Fatalf("--json --show lacks the tree")
	}
	want2, _, _ := modelByRecursion(shown.Plan.Parent, shown.Plan.Order, 0.007, 0.172)
	if shown.Modeled != want2 || want2 != want {
		t.Fatalf("modeled %v, recursion over printed tree %v", shown.Modeled, want2)
	}
	// Greedy beats the 2-level tree here.
	_, out, _ = runPlan(t, "--nodes", "1000", "--seq", "0.007", "--rem", "0.172", "--tree", "2level", "--json")
	if two := decodePlanJSON(t, out); two.Modeled <= want || two.Tree != "2level" {
		t.Fatalf("2level %v, greedy %v", two.Modeled, want)
	}
}

func TestPlanHumanOutput(t *testing.T) {
	code, out, errs := runPlan(t, "--nodes", "40", "--tree", "kary:3", "--replicas", "3", "--show")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	nodeLines := 0
	for _, l := range lines {
		if strings.Contains(l, " up ") {
			nodeLines++
		}
	}
	if nodeLines != 40 {
		t.Fatalf("--show printed %d node lines, want 40:\n%s", nodeLines, out)
	}
	for _, want := range []string{
		"0 root replica 0 up 0.000 s",
		"  1 order 1 backup root-group replica 1 up 0.034 s",
		"    4 order 1 backup 2 up 0.068 s", // cousin under another parent
		"tree          kary:3\n",
		"depth         3\n",
		"max fan-out   3\n",
		"replicas      3 on node 0, 1, 2\n",
		"modeled       0.312 s (seq 0.035 s, rem 0.034 s)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestPlanHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		code, out, errs := runPlan(t, arg)
		if code != 0 || errs != "" || !strings.Contains(out, "Usage: ftlaunch plan") || !strings.Contains(out, "--rem-samples") ||
			!strings.Contains(out, "-H host1") || !strings.Contains(out, "--hostfile FILE") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out, errs)
		}
	}
}

func TestPlanBadUsage(t *testing.T) {
	dir := t.TempDir()
	badSamples := filepath.Join(dir, "rem.txt")
	if err := os.WriteFile(badSamples, []byte("0.03\nslow\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{nil, "--nodes N is required"},
		{[]string{"--nodes", "0"}, "--nodes N is required"},
		{[]string{"--nodes", "-4"}, "--nodes must be >= 1"},
		{[]string{"--nodes", "x"}, "invalid value"},
		{[]string{"--nodes", "10", "--tree", "foo"}, `unknown tree kind "foo"`},
		{[]string{"--nodes", "10", "--tree", "kary:0"}, "kary:0"},
		{[]string{"--nodes", "10", "--tree", "kary:x"}, "not an integer"},
		{[]string{"--nodes", "10", "--seq", "-1"}, "--seq must be"},
		{[]string{"--nodes", "10", "--rem", "-0.5"}, "--rem must be"},
		{[]string{"--nodes", "10", "--rem", "NaN"}, "--rem must be"},
		{[]string{"--nodes", "10", "--batch", "-1"}, "--batch must be"},
		{[]string{"--nodes", "10", "--batch-wait", "1"}, "--batch-wait needs --batch"},
		{[]string{"--nodes", "10", "--batch", "2", "--batch-wait", "-1"}, "--batch-wait must be"},
		{[]string{"--nodes", "10", "--replicas", "0"}, "--replicas must be"},
		{[]string{"--nodes", "2", "--replicas", "3"}, "at most 2 root replicas"},
		{[]string{"--nodes", "10", "--simulate", "--runs", "0"}, "--runs must be >= 1"},
		{[]string{"--nodes", "10", "--simulate", "--concurrency", "0"}, "--concurrency must be"},
		{[]string{"--nodes", "10", "--runs", "5"}, "--runs needs --simulate"},
		{[]string{"--nodes", "10", "--simulate", "--rem-samples", badSamples}, badSamples + " line 2"},
		{[]string{"--nodes", "10", "--simulate", "--rem-samples", filepath.Join(dir, "none")}, "--rem-samples"},
		{[]string{"--nodes", "10", "--hostfile", "hosts"}, "either --nodes or --hostfile"},
		{[]string{"--nodes", "10", "-H", "a,b"}, "either --nodes or --hostfile"},
		{[]string{"-H", "a,,b"}, `entry 2 "": empty host name`},
		{[]string{"--hostfile", filepath.Join(dir, "no-such-hostfile")}, "no-such-hostfile"},
		{[]string{"--nodes", "10", "extra"}, `unexpected argument "extra"`},
		{[]string{"--frobnicate"}, "flag provided but not defined"},
		{[]string{"--nodes", "10", "--work-rate", "0.1"}, "--work-rate needs --cores"},
		{[]string{"--nodes", "10", "--work-per-rank", "0.1"}, "--work-per-rank needs --cores"},
		{[]string{"--nodes", "10", "--cores", "2", "--work-per-rank", "-1"}, "--work-per-rank must be"},
		{[]string{"--nodes", "10", "--ppn", "0"}, "--ppn must be"},
		{[]string{"--nodes", "10", "--cores", "2", "--work-rate", "-1"}, "--work-rate must be"},
		{[]string{"--nodes", "10", "--cores", "2", "--tree", "flat", "--fit", "seq", "--measured", "1"}, `--fit "seq"`},
		{[]string{"--nodes", "10", "--cores", "2", "--tree", "flat", "--fit", "work"}, "--fit needs"},
		{[]string{"--nodes", "10", "--cores", "2", "--fit", "work", "--measured", "1"}, "--fit needs"},
		{[]string{"--nodes", "10", "--tree", "flat", "--fit", "rate", "--measured", "1"}, "--fit needs"},
		{[]string{"--nodes", "10", "--tree", "flat", "--measured", "1"}, "--measured needs --fit"},
	}
	for _, c := range cases {
		code, out, errs := runPlan(t, c.args...)
		if code != 2 || out != "" {
			t.Errorf("%q: exit %d stdout %q, want exit 2 and no output", c.args, code, out)
			continue
		}
		if !strings.HasPrefix(errs, "ftlaunch plan: ") || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: stderr %q, want one line with %q", c.args, errs, c.want)
		}
	}
}

// With an allocation the plan covers the front-end plus one node per host.
func TestPlanFromAllocation(t *testing.T) {
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("# three hosts\nn1 slots=4\nn2:2\n\nn3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A host named again adds slots, not a node (-H a,b,a is two hosts).
	for _, args := range [][]string{{"--hostfile", hosts}, {"-H", "n1:4,n2:2,n3"}, {"-f", hosts}, {"--hosts", "n1,n2,n1,n3"}} {
		code, out, errs := runPlan(t, append(args, "--tree", "flat", "--json")...)
		if code != 0 || !strings.Contains(out, `"nodes":4`) {
			t.Errorf("%q: exit %d, stdout %s, stderr %s", args, code, out, errs)
		}
	}
}

func TestPlanSimulate(t *testing.T) {
	// Constant REM, one lane: the simulation equals the model.
	code, out, errs := runPlan(t, "--nodes", "500", "--tree", "binomial", "--batch", "4", "--batch-wait", "0.01",
		"--simulate", "--runs", "7", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got := decodePlanJSON(t, out)
	if s := got.Simulation; s == nil || s.Runs != 7 || s.Median != got.Modeled || s.P99 != got.Modeled {
		t.Fatalf("simulation %+v, modeled %v", got.Simulation, got.Modeled)
	}
	// Sampled REM: runs spread between the model at the extremes.
	samples := filepath.Join(t.TempDir(), "rem.txt")
	if err := os.WriteFile(samples, []byte("# rem\n0.02\n0.03\n0.25\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runPlan(t, "--nodes", "300", "--tree", "kary:4", "--simulate", "--rem-samples", samples,
		"--runs", "50", "--seed", "9", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got = decodePlanJSON(t, out)
	s := got.Simulation
	if s == nil || s.Min < 5*0.02 || s.Max > 4*3*0.035+5*0.25 || s.Median > s.P99 || s.Min >= s.Max {
		t.Fatalf("sampled simulation %+v", s)
	}
	// The same seed gives the same figures; the human form prints them.
	_, again, _ := runPlan(t, "--nodes", "300", "--tree", "kary:4", "--simulate", "--rem-samples", samples,
		"--runs", "50", "--seed", "9", "--json")
	if again != out {
		t.Fatalf("same seed, different output:\n%s\n%s", out, again)
	}
	code, out, _ = runPlan(t, "--nodes", "300", "--simulate", "--concurrency", "4", "--runs", "3")
	if code != 0 || !strings.Contains(out, "simulated     median ") || !strings.Contains(out, "concurrency 4") {
		t.Fatalf("human simulation output:\n%s", out)
	}
}

// TestPlanAutoCalibration: auto is greedy from the defaults, or from --seq
// and --rem when they are given.
func TestPlanAutoCalibration(t *testing.T) {
	_, a, _ := runPlan(t, "--nodes", "2000", "--seq", "0.001", "--rem", "0.5", "--json", "--show")
	_, g, _ := runPlan(t, "--nodes", "2000", "--seq", "0.001", "--rem", "0.5", "--tree", "greedy", "--json", "--show")
	ja, jg := decodePlanJSON(t, a), decodePlanJSON(t, g)
	if ja.Tree != "auto" || ja.Modeled != jg.Modeled || ja.Depth != jg.Depth {
		t.Fatalf("auto %+v vs greedy %+v", ja, jg)
	}
	_, d, _ := runPlan(t, "--nodes", "2000", "--json")
	_, dg, _ := runPlan(t, "--nodes", "2000", "--tree", "greedy", "--json")
	if jd, jdg := decodePlanJSON(t, d), decodePlanJSON(t, dg); jd.Seq != plan.DefaultSeq || jd.Rem != plan.DefaultRem || jd.Modeled != jdg.Modeled {
		t.Fatalf("auto with defaults %+v vs greedy %+v", jd, jdg)
	}
}
