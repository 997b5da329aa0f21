// Package launcher starts agents: the launcher of a node's children in the
// launch tree (one at a time or in groups, over a spawn.Spawner), the
// accept loop their links come back to, the local, SSH and per-host
// spawners, the socketpair link of an agent on this machine, and the
// orphan guard of an agent run in the front-end's process. The root and
// the agent both start agents through it (the root its first level, an
// agent its children, a successor the children the front-end had not
// started), and it holds what they share about a successor root
// (ResumeConfig, and the job it takes over: Takeover). The root's link to
// each agent sends through a Route (its own link or its top ancestor's,
// held while a move is not committed).
//
// Goroutines: Launcher.Run (until every start reported, or its context),
// AcceptLoop (until its listener closes; it joins its handshakes).
package launcher
