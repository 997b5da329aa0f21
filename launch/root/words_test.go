package root

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/proto"
)

// TestPlainLinkError: the socket errors of a lost agent's link read in
// plain words, keep their cause for errors.Is, and other errors pass as
// they are.
func TestPlainLinkError(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, err := range []error{io.EOF, fmt.Errorf("link: %w", io.ErrUnexpectedEOF), reset, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}} {
		got := plainLinkError(err)
		if s := got.Error(); strings.Contains(s, "EOF") || strings.Contains(s, "tcp") || !strings.HasPrefix(s, "its link was ") {
			t.Errorf("plainLinkError(%v) = %q", err, s)
		}
		if !errors.Is(got, errors.Unwrap(got)) || errors.Unwrap(got) != err {
			t.Errorf("plainLinkError(%v) lost its cause", err)
		}
	}
	if got := plainLinkError(proto.ErrHeartbeat); got != proto.ErrHeartbeat {
		t.Errorf("plainLinkError(ErrHeartbeat) = %v", got)
	}
	if plainLinkError(nil) != nil {
		t.Error("plainLinkError(nil) != nil")
	}
}

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
