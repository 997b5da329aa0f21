package overlay

import (
	"context"
	"errors"
)

// Message is one message received by a [Transport].
type Message struct {
	// From is the node id of the sender.
	From int
	// Payload is owned by the receiver: the transport never touches it
	// again.
	Payload []byte
}

// Transport is the endpoint of one tree node in the overlay. Messages are
// opaque byte strings addressed by node id; a transport neither orders nor
// retries across failures: a message is delivered at most once.
//
// Send, Recv and Close are safe for concurrent use. Recv is normally called
// by one goroutine, the node's reader.
type Transport interface {
	// Send queues a copy of msg for the node to; the caller may reuse msg
	// as soon as Send returns. Send never blocks forever: when the
	// receiver cannot take the message (its inbox or send queue is full)
	// it returns an error wrapping [ErrBackpressure] and the message is
	// dropped. A peer that is dead but not known to be dead swallows
	// messages silently, as a crashed host does; the caller's timeouts and
	// the failure detector notice it.
	Send(to int, msg []byte) error
	// Recv returns the next message. It returns ctx.Err() when ctx ends
	// and an error wrapping [ErrClosed] once the endpoint is closed (a
	// message queued before Close may still be returned).
	Recv(ctx context.Context) (Message, error)
	// Close releases the endpoint; later calls of Send and Recv fail with
	// [ErrClosed]. Close is idempotent.
	Close() error
}

// ErrClosed is wrapped by the errors of a closed endpoint.
var ErrClosed = errors.New("transport closed")

// ErrBackpressure is wrapped by the error Send returns when the receiver
// cannot take the message now; the message was dropped.
var ErrBackpressure = errors.New("receiver full: message dropped")

// ErrUnreachable is wrapped by the error Send returns for a node id that
// the transport does not know or whose endpoint has been closed.
var ErrUnreachable = errors.New("node unreachable")
