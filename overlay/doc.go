// Package overlay carries messages between the launcher agents of one job
// and runs the job's collectives over their tree.
//
// Two layers live here:
//
//   - [Transport] is one endpoint per tree node: it sends an opaque, copied
//     message to a node id and receives messages tagged with the sender's
//     id. [MemNetwork] is an in-memory implementation for tests and
//     benchmarks, with seeded loss, delay, crashes and partitions; the
//     TCP+TLS transport of real runs implements the same interface.
//   - [Engine] runs the collectives of one tree node: gather, broadcast,
//     allgather, barrier, the ring exchange (a scan that gives each member
//     its neighbours in member-id order) and the bulletin board (put, fence,
//     get). An engine is fed by its local members through
//     [Engine.Contribute] and [Engine.Put], and by its tree neighbours
//     through [Engine.Handle] (or [Engine.Run], which reads its transport);
//     it delivers results through the [Config.OnResult] callback.
//
// Collectives are identified by a [CollID] carrying an epoch and a sequence
// number. A collective is never repaired: when a node fails the job moves
// to a newer epoch ([Engine.SetEpoch]), collectives of older epochs are
// aborted and their callers start them again.
//
// The topology (parent, children, local members) is plain data given by
// the caller; this package does not compute plans.
package overlay
