// Package launch is the facade that starts a parallel job (Run, Options,
// Result) and the agent's entry (AgentMain). It wires the two roles that
// do not import each other: the root (launch/root), which plans the job
// and collects its output and exit status, and the node agent
// (launch/agent), which spawns and watches a node's ranks; they speak the
// link protocol of launch/proto and start agents through launch/launcher.
//
// Processes. The front-end (ftlaunch run) starts one agent per node as its
// own process (ftlaunch agent), connected by a link; the agent spawns the
// node's ranks, each in its own process group, with the rank protocol on an
// inherited socket (FTLAUNCH_FD). The agent outlives a killed front-end long
// enough to notice the closed link and kill every rank's process group.
//
// Threading. Each link has one reader goroutine; all of the front-end's
// decisions are made by one event loop that owns the job's state, so no
// lock guards it. An agent serves each rank's socket from a goroutine of
// its own and serializes writes on its link with a mutex.
package launch
