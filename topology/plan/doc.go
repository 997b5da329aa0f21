// Package plan builds ftlaunch launch plans: the tree in which launcher
// agents start each other, the launch-time model that scores such a tree,
// the backup (redundant) parent of every agent, the placement of the root
// replicas, and a discrete-event simulator of a launch.
//
// A plan is built from a node count N alone (nodes 0..N-1, node 0 is the
// root, which is the front-end) by a pure, deterministic function, so every
// root replica that holds the same (kind, N, Params) holds the same plan.
// The tree shapes are Goehner's greedy tree (optimal under the model), k-ary,
// two-level (charmrun's hierarchical start), binomial and flat.
//
// The model (see docs/model.md in the repository) is
//
//	launch(root) = 0
//	launch(child_i) = launch(parent) + SEQ*(i-1) + REM
//	launch(T) = max over nodes of launch(node)
//
// where i is the child's 1-based order at its parent.
//
// Threading: a *Plan is immutable once Build returns and may be read from
// any number of goroutines. Nothing in the package keeps global state.
package plan
