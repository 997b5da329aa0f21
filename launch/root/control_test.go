package root

import (
	"syscall"
	"testing"
	"time"
)

// TestEndingSteps: the user's SIGTERM is not said twice ("SIGTERM to every
// rank, then SIGTERM"), and SIGKILL has no later step.
func TestEndingSteps(t *testing.T) {
	for s, want := range map[syscall.Signal]string{
		syscall.SIGTERM: "SIGTERM to every rank, SIGKILL after 5s",
		syscall.SIGINT:  "SIGINT to every rank, then SIGTERM, SIGKILL after 5s",
		syscall.SIGKILL: "SIGKILL to every rank",
	} {
		if got := endingSteps(s, 5*time.Second); got != want {
			t.Errorf("endingSteps(%v) = %q, want %q", s, got, want)
		}
	}
}
