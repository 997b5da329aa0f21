// Package raftstore is the replicated root state of one ftlaunch job: a
// hashicorp/raft state machine, its files, and a read-only inspector.
//
// The state (State) is the job spec, the launch plan, the agents'
// addresses, the node table (rank -> node, pid, I-tuple, incarnation,
// state) with a version that only grows, the recovery epoch (one, moved
// by takeovers and recoveries), where the last recovery stands (typed:
// Recovery), the job's final status, and the event log. The event log is part of the state, so
// snapshots carry it and log compaction loses nothing.
//
// Commands (Command) are compact binary log entries: a type byte whose
// high bit (IgnoreUnknown) lets an older replica skip a newer command, a
// payload version, the events the command appends, then the type's
// fields. One UpdateRanks carries a whole subtree's report, so a launch of
// thousands of ranks costs a handful of entries. The FSM refuses, without
// changing anything, a command that contradicts the state (ErrRefused):
// a patch computed against an old table version, an epoch bump, a plan
// or a recovery record from another epoch than the state's (a deposed
// root's), a failure report about an older incarnation or one already
// reported, a recovery without a failure, a second final status.
//
// A Replica runs one raft server with its log and stable store in bbolt
// (raft-boltdb v2) and its snapshots in a raft.FileSnapshotStore, all
// under STATE/<node-name>/. OpenReadOnly rebuilds a stopped replica's
// state from those files, for post-mortem inspection.
//
// Consistency checks for tests and chaos runs: State.Digest (replicas that
// applied the same log agree on it) and State.CheckInvariants.
//
// Long-lived goroutines: raft's own (stopped by Replica.Shutdown, which
// waits for them), and one per Replica that forwards leadership changes
// (stopped by Shutdown too). Apply and VerifyLeader each wait for raft in
// a goroutine that ends when raft answers, at the latest when raft shuts
// down; Shutdown waits for those as well.
package raftstore
