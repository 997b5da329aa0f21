package output

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOpenJob: a successor's output goes to the job's directory: a file
// per rank and stream, and its log appended to after an earlier one's
// (each successor's line said by Logf).
func TestOpenJob(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, JobOutput, JobLog)
	for i, which := range []string{"first", "second"} {
		w, logf, err := OpenJob(dir, 2)
		if err != nil {
			t.Fatal(err)
		}
		w.Start()
		w.Logf("%s successor", which)
		w.Close()
		if err := logf.Close(); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"rank.0.out", "rank.0.err", "rank.1.out", "rank.1.err"} {
			if _, err := os.Stat(filepath.Join(dir, JobOutput, f)); err != nil {
				t.Errorf("successor %d: %v", i, err)
			}
		}
	}
	if b, err := os.ReadFile(log); err != nil || string(b) != "first successor\nsecond successor\n" {
		t.Errorf("log %q, %v: want both successors' messages", b, err)
	}
}
