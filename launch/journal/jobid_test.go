package journal

import (
	"regexp"
	"testing"
)

// TestNewJobID: a job's id starts with JobPrefix, which Prune takes for a
// job's directory, and two jobs get two.
func TestNewJobID(t *testing.T) {
	a, b := NewJobID(), NewJobID()
	if !regexp.MustCompile("^"+JobPrefix+"[0-9a-f]{12}$").MatchString(a) || a == b {
		t.Fatalf("job ids %q, %q", a, b)
	}
}
