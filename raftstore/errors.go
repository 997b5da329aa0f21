package raftstore

import "errors"

// Errors returned by this package. Callers test for them with errors.Is;
// the returned errors wrap them with context.
var (
	// ErrMalformed: a command or a snapshot could not be decoded.
	ErrMalformed = errors.New("malformed data")

	// ErrUnknownCommand: a command type this replica does not know, sent
	// without the ignore-unknown bit.
	ErrUnknownCommand = errors.New("unknown command type")

	// ErrRefused: the command was committed to the log but the FSM refused
	// it because it contradicts the state (a stale version or epoch, a
	// second final status, a recovery without a failure...). The state is
	// unchanged by a refused command.
	ErrRefused = errors.New("command refused by the state machine")

	// ErrNotLeader: this replica is not the leader; the command was not
	// committed.
	ErrNotLeader = errors.New("not the raft leader")

	// ErrIndeterminate: the command may or may not have been committed
	// (leadership was lost, or the wait timed out, after the command was
	// handed to raft). Read the state from the new leader to find out.
	ErrIndeterminate = errors.New("command may or may not have been committed")

	// ErrShutdown: the replica is shut down.
	ErrShutdown = errors.New("replica is shut down")

	// ErrLocked: a replica's database is held by a running process.
	ErrLocked = errors.New("replica database is locked by a running replica")

	// ErrForeign: the file is a bbolt database, but not an ftlaunch replica's.
	ErrForeign = errors.New("not an ftlaunch replica database")

	// ErrCorrupt: the database or a snapshot is truncated or damaged.
	ErrCorrupt = errors.New("replica database is truncated or corrupt")

	// ErrInvariant: a consistency check failed.
	ErrInvariant = errors.New("invariant violated")
)
