package proto

import "time"

// GroupHold is how long a replicated root's group waits for a short launch
// to finish before it starts anyway: a launch that takes longer can then
// survive the front-end's loss (its first election takes a few hundred
// milliseconds), and a short one does not share the CPU with it.
const GroupHold = 100 * time.Millisecond
