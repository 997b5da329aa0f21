package proto

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestPlainLinkError: the socket errors of a lost agent's link read in
// plain words, keep their cause for errors.Is, and other errors pass as
// they are.
func TestPlainLinkError(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	for _, err := range []error{io.EOF, fmt.Errorf("link: %w", io.ErrUnexpectedEOF), reset, &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}} {
		got := PlainLinkError(err)
		if s := got.Error(); strings.Contains(s, "EOF") || strings.Contains(s, "tcp") || !strings.HasPrefix(s, "its link was ") {
			t.Errorf("PlainLinkError(%v) = %q", err, s)
		}
		if !errors.Is(got, errors.Unwrap(got)) || errors.Unwrap(got) != err {
			t.Errorf("PlainLinkError(%v) lost its cause", err)
		}
	}
	if got := PlainLinkError(ErrHeartbeat); got != ErrHeartbeat {
		t.Errorf("PlainLinkError(ErrHeartbeat) = %v", got)
	}
	if PlainLinkError(nil) != nil {
		t.Error("PlainLinkError(nil) != nil")
	}
}
