package deptest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// fuzzTargets lists every `func FuzzX(` in the repository's test files
// below root, as "./pkg:FuzzX".
func fuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			out = append(out, "./"+filepath.ToSlash(rel)+":"+string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestMakeFuzzRunsEveryTarget: `make fuzz` names every fuzz target the
// repository has, so that a new one is not left out of it.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	// One recipe line per target: -fuzz '^FuzzX$$' ... ./pkg
	line := regexp.MustCompile(`-fuzz '\^(Fuzz\w+)\$\$' .* (\./\S+)`)
	inMake := map[string]bool{}
	for _, m := range line.FindAllSubmatch(mk, -1) {
		inMake[string(m[2])+":"+string(m[1])] = true
	}
	targets := fuzzTargets(t, root)
	if len(targets) < 12 { // the repository has 12 (overlay's FuzzHandle went with its engine): fewer means the finder broke
		t.Fatalf("found %d fuzz targets: %v", len(targets), targets)
	}
	for _, f := range targets {
		if !inMake[f] {
			t.Errorf("make fuzz does not run %s: add a line to the Makefile's fuzz target", f)
		}
	}
}
