// Package journal is the front-end's handle on a job's state log: the
// replicated root state of package raftstore, written as the launch goes.
//
// Open starts the job's replica group (today a single voter, replica 0,
// which lives in the front-end) with its files under
// STATE-DIR/<job id>/<node name>/, and points STATE-DIR/latest at the job.
// It returns at once: the replica opens its files and elects itself in a
// goroutine the Journal owns, and everything written before it leads waits
// in a queue.
//
// The record methods (Plan, AgentUp, RanksStarted, NodeTable, RankExited,
// Failure) never block and never fail: they append to an in-memory queue
// and return. The journal goroutine folds the queue into few raft entries:
// it keeps its own copy of the node table and sends only the rows that
// changed, one UpdateRanks per flush (split at Config.MaxRows rows), with
// the flush's events riding on the last command. A flush happens when a
// milestone arrives (the plan, the node table, a failure), when Linger has
// passed since the oldest unflushed record, or when enough rows wait; at
// most one flush is in flight, and records that arrive meanwhile wait for
// the next. A launch of thousands of ranks thus costs a handful of entries.
// Write errors do not stop the job: the first is kept (Err) and returned by
// Close.
//
// Close flushes, commits the final status (raftstore.Finish) and shuts the
// replica down; after it the files can be read with raftstore.OpenReadOnly
// (see Load, and `ftlaunch inspect`).
//
// The launch steps are raftstore events of kind EventLaunch whose Detail
// starts with a step name and ": " (see the Step constants); Analyze turns
// a state back into a job's timeline, agents, phases and per-rank history.
//
// Goroutines: one per Journal (started by Open, ended by Close, which waits
// for it and for the replica's own goroutines).
package journal
