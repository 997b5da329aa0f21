// Package spawn is the interface between ftlaunch's launch tree and the
// mechanisms that start an agent on another node: SSH (launch/sshspawn),
// Slurm's srun, or a plain local process (test nodes).
//
// A spawner starts one command on one host with a few bytes on its stdin
// (the agent's bootstrap: job credentials, never argv or the environment)
// and keeps the session open for the command's life: closing the session
// closes the command's stdin, which an agent takes as the end of its job.
package spawn

import (
	"context"
	"io"
	"time"
)

// Timings describe one start.
type Timings struct {
	// Total is the time from the call to Start until the command ran.
	Total time.Duration
	// Queued is how much of Total the start waited for a free slot under
	// the spawner's concurrency bounds.
	Queued time.Duration
	// Attempts counts connection attempts (1 when the first succeeded).
	Attempts int
}

// Session is a command started on a host.
type Session interface {
	// Stdout and Stderr are the command's output streams. Read them both
	// (or discard them) or the command may block.
	Stdout() io.Reader
	Stderr() io.Reader
	// Wait waits for the command to end and reports how it ended.
	Wait() error
	// Close ends the session: the command's stdin is closed and, where the
	// mechanism allows, the command is signalled. It does not wait.
	Close() error
	// Timings reports how the start went.
	Timings() Timings
}

// Spawner starts commands on hosts. Its methods are safe for concurrent
// use.
type Spawner interface {
	// Start runs argv on host with stdin written to the command's standard
	// input (which then stays open). It returns once the command runs.
	Start(ctx context.Context, host string, argv []string, stdin []byte) (Session, error)
}

// reachedKey carries a start's reached callback (WithReached).
type reachedKey struct{}

// WithReached returns ctx carrying reached, which a spawner that connects
// to its host over a network calls once it holds a connection there (SSH:
// the TCP connection is up), before the command runs. A fence tells so a
// host that does not answer from one that is slow to run it
// (docs/recovery.md, "Fencing").
func WithReached(ctx context.Context, reached func()) context.Context {
	return context.WithValue(ctx, reachedKey{}, reached)
}

// Reached calls ctx's reached callback (WithReached), if it has one.
func Reached(ctx context.Context) {
	if f, ok := ctx.Value(reachedKey{}).(func()); ok {
		f()
	}
}

// Redials reports whether ctx asks its spawner to reach the host as soon
// as it can (it carries a reached callback): a connection not answered
// within a fraction of a second is dialled again in parallel, against a
// lost SYN.
func Redials(ctx context.Context) bool {
	_, ok := ctx.Value(reachedKey{}).(func())
	return ok
}
