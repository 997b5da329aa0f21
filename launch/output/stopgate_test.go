package output

import (
	"os"
	"syscall"
	"testing"
)

// TestStopGate: a SIGCONT reaches the ranks only after the front-end
// forwarded them a stop, once per stop; a terminal's stop goes on as
// SIGSTOP; other signals always go on as they are.
func TestStopGate(t *testing.T) {
	for _, tc := range []struct {
		name string
		sigs []os.Signal
		want []bool
	}{
		{"own stop ended", []os.Signal{syscall.SIGCONT}, []bool{false}},
		{"forwarded stop", []os.Signal{syscall.SIGTSTP, syscall.SIGCONT}, []bool{true, true}},
		{"one resume per stop", []os.Signal{syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGCONT}, []bool{true, true, false}},
		{"stopped again", []os.Signal{syscall.SIGTSTP, syscall.SIGCONT, syscall.SIGCONT, syscall.SIGTTIN, syscall.SIGCONT}, []bool{true, true, false, true, true}},
		{"others pass", []os.Signal{syscall.SIGUSR1, syscall.SIGCONT, syscall.SIGUSR2, syscall.SIGTERM}, []bool{true, false, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g StopGate
			for i, s := range tc.sigs {
				out, ok := g.Forward(s)
				if ok != tc.want[i] {
					t.Errorf("signal %d (%v): forwarded %v, want %v", i, s, ok, tc.want[i])
				}
				want := s
				if s == syscall.SIGTSTP || s == syscall.SIGTTIN {
					want = syscall.SIGSTOP
				}
				if ok && out != want {
					t.Errorf("signal %d (%v) goes on as %v, want %v", i, s, out, want)
				}
			}
		})
	}
}
