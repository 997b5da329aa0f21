// Package agent is the node agent: it receives its node's share of the
// job on its parent link, spawns and supervises the node's ranks (their
// incarnations under the restart protocol), serves their rank protocol and
// PMI-1, combines their collectives, forwards output and exits, relays its
// children's frames in the launch tree, starts its children, and hosts a
// root replica (with --replicas 3|5), whose successor root it runs when it
// wins the group's election after the front-end's loss (Resume, injected
// by the facade: the agent does not import the root).
//
// The Agent's state is grouped by owner: supervision (the ranks),
// collectives (collectives and PMI key spaces), failoverState (the replica
// role and the root's failover) and parentLinks (backup and fallback
// parents), beside treeState (its children); all under the Agent's mu.
// Messages from the parent go to a handler per family (handle).
//
// Goroutines: all started through Agent.goFunc (or the WaitGroup it gives
// the tree and rank code) and joined by the agent's run after its context
// is cancelled. The successor root the agent runs is stopped with it: once
// its link ended, run gives the successor successorGrace to end by itself,
// then cancels its context and waits until it ended (stopSuccessor).
package agent
