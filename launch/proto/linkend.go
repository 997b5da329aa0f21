package proto

import (
	"errors"
	"io"
	"syscall"
)

// A link's end in people's words: "EOF" or "read tcp 10.0.0.3:4100->
// 10.0.0.1:37012: connection reset by peer" say nothing to whoever reads
// "lost the agent of node node3: ...". errors.Is and errors.As still see
// the cause.

// linkEnd is a link's end said plainly.
type linkEnd struct {
	words string
	err   error
}

func (e *linkEnd) Error() string { return e.words }
func (e *linkEnd) Unwrap() error { return e.err }

// PlainLinkError says why a link to an agent ended (Link.Run's error) in
// plain words, for the socket errors a lost agent gives; other errors (a
// heartbeat timeout, a protocol error) already say it and are returned as
// they are.
func PlainLinkError(err error) error {
	var words string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		words = "its link was closed (the agent's process ended, or its host went down)"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		words = "its link was reset (the agent's process ended, or its host restarted)"
	case errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		words = "its host stopped answering on the network"
	default:
		return err
	}
	return &linkEnd{words: words, err: err}
}
