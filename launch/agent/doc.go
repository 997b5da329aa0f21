// Package agent is the node agent: it receives its node's share of the
// job on its parent link, spawns and supervises the node's ranks (their
// incarnations under the restart protocol), serves their rank protocol and
// PMI-1, combines their collectives, forwards output and exits, relays its
// children's frames in the launch tree, starts its children, and hosts a
// root replica (with --replicas 3|5), whose successor root it runs when it
// wins the group's election after the front-end's loss (Resume, injected
// by the facade: the agent does not import the root).
//
// Goroutines: all started through Agent.goFunc (or the WaitGroup it gives
// the tree and rank code) and joined by the agent's run after its context
// is cancelled.
package agent
