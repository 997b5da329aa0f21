// Package proto is the link protocol the root and the agents speak: every
// message type in one table (messages.go), their codecs (fuzzed:
// FuzzDecoders), the heartbeated link (Link), the credit window and the
// numbered, acknowledged output queue that carries a node's output across
// a root failover (outq.go), the bootstrap an agent started over SSH reads,
// prestaging, and the programs of a job (App). Both roles import it; it
// imports neither.
//
// Goroutines: a Link's reader and heartbeat, started by Link.Run and
// stopped by its context or the connection's end.
package proto
