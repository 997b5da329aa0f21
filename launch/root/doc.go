// Package root is the root of a job: the front-end's (Run) or, after the
// front-end's loss, a replica agent's (Resume, rebuilt from the replicated
// state: the same loop, no mode flags). One event loop owns the job's
// state: agents' messages and link ends arrive as typed events; collectives
// are merged here; every failure decision goes through the recovery
// planner, whose commits to the state log (launch/journal) are done before
// the actions that depend on them; output goes through launch/output and
// the live report to the job's directory.
//
// It does not import the agent: the facade (launch) injects this machine's
// in-process agent (LocalHooks), and a successor gets its launcher of the
// root's children from the replica agent that runs it.
//
// Goroutines: all started through frontend.goFunc onto a WaitGroup joined
// by Run (a successor's, before Successor's done closes), after the
// context is cancelled; the output writer's is its own (output.Writer's
// Close joins it); the stdin reader alone is not joined (a terminal's read
// cannot be interrupted).
package root
