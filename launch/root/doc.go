// Package root is the root of a job: the front-end's (Run) or, after the
// front-end's loss, a replica agent's (Resume, rebuilt from the replicated
// state: the same loop). One event loop owns the job's state: agents'
// messages and link ends arrive as typed events; collectives are merged
// here; every failure decision goes through the recovery planner, committed
// to the state log (launch/journal) before the actions that depend on it.
// It does not import the agent: the facade injects this machine's
// (LocalHooks).
//
// Goroutines: all started through frontend.goFunc and joined by Run (a
// successor's, before Successor's done closes) once the context is
// cancelled; the output writer's by its Close; the stdin reader's by its
// stop, unless its read cannot be interrupted (a terminal's).
package root
