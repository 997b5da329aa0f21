package deptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/ftlaunch/ftlaunch/"

// layers gives every package of the project its layer: a package may
// import only packages of a lower layer. docs/design.md shows the same
// table; a new package is added to both.
var layers = map[string]int{
	// Leaves: nothing of the project.
	"overlay/wire":     0,
	"topology/plan":    0,
	"overlay/secure":   0,
	"raftstore":        0,
	"membership":       0,
	"launch/alloc":     0,
	"launch/pmi":       0,
	"launch/pmix":      0,
	"launch/spawn":     0,
	"launch/rankenv":   0,
	"launch/fence":     0,
	"chaos/cluster":    0,
	"internal/deptest": 0,
	"internal/testbuf": 0,
	// Built on leaves.
	"overlay":          1,
	"launch/rankproto": 1,
	"launch/journal":   1,
	"launch/srunspawn": 1,
	"launch/sshspawn":  1, // tells launch/spawn's context when it reached a host
	"chaos/slurm":      1,
	"topology":         1,
	"recovery":         2, // plans over the launch tree (topology); makes the state log's records (launch/journal)
	"launch/client":    2,
	"launch/calibrate": 2, // the model's inputs and measurements: the launch plan (topology/plan), the state log's records (launch/journal)
	"chaos/ringapp":    3, // the recovery application: a rank program over the client library
	// The link protocol both roles speak, then starting agents.
	"launch/proto":    2,
	"launch/launcher": 3,
	"launch/output":   3,
	// The two roles: neither imports the other (a replica agent's
	// successor root is injected by the facade).
	"launch/root":  4,
	"launch/agent": 4,
	// The facade, which wires the roles together.
	"launch": 5,
	// What reads or composes the launcher: a job's state directory, the
	// chaos harness, the commands.
	"launch/jobstate":     6,
	"chaos/chaostest":     6,
	"chaos/trial":         6,
	"chaos/harness":       7,
	"launch/jobctl":       7,
	"cmd/ftlaunch":        8,
	"cmd/ftdemo":          8,
	"cmd/ftbench":         8,
	"chaos/cmd/ftcluster": 8,
	"chaos/cmd/ftslurm":   8,
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// violations lists every import of a project package that does not point
// to a lower layer, and every package missing from the table.
func violations(pkgs []pkg, layers map[string]int) []string {
	var out []string
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, module)
		l, ok := layers[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the layer table of internal/deptest (add it there and to docs/design.md)", name))
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			dl, ok := layers[dep]
			if ok && dl < l {
				continue
			}
			out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): imports must point to a lower layer", name, l, dep, dl))
		}
	}
	sort.Strings(out)
	return out
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// TestImportDirection checks the real import graph (without tests' imports).
func TestImportDirection(t *testing.T) {
	cmd := exec.Command(goTool(), "list", "-json=ImportPath,Imports", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, v := range violations(pkgs, layers) {
		t.Error(v)
	}
}

// TestViolationsFound plants wrong-way imports in a made-up graph: the
// check must name each.
func TestViolationsFound(t *testing.T) {
	got := violations([]pkg{
		{ImportPath: module + "recovery", Imports: []string{"fmt", module + "launch"}},
		{ImportPath: module + "launch", Imports: []string{module + "recovery", module + "launch/journal"}},
		{ImportPath: module + "overlay", Imports: []string{module + "overlay"}},
		{ImportPath: module + "newpkg"},
	}, layers)
	want := []string{
		"newpkg: not in the layer table of internal/deptest (add it there and to docs/design.md)",
		"overlay (layer 1) imports overlay (layer 1): imports must point to a lower layer",
		"recovery (layer 2) imports launch (layer 5): imports must point to a lower layer",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
