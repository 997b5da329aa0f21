package overlay

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// NewEngine returns the engine of node cfg.ID.
func NewEngine(cfg Config) (*Engine, error) {
	if cfg.Transport == nil {
		return nil, errors.New("new engine: no transport")
	}
	t, err := newTopo(cfg.ID, cfg.Topology)
	if err != nil {
		return nil, fmt.Errorf("new engine: %w", err)
	}
	e := &Engine{
		id:          cfg.ID,
		tr:          cfg.Transport,
		onResult:    cfg.OnResult,
		onError:     cfg.OnError,
		maxOpen:     cfg.MaxOpen,
		maxDeferred: cfg.MaxDeferred,
		topo:        t,
		epoch:       cfg.Epoch,
		colls:       make(map[CollID]*coll),
		pending:     make(map[string][]byte),
		seed:        maphash.MakeSeed(),
	}
	if e.maxOpen <= 0 {
		e.maxOpen = 4096
	}
	if e.maxDeferred <= 0 {
		e.maxDeferred = 4096
	}
	return e, nil
}

// Epoch returns the engine's current epoch.
func (e *Engine) Epoch() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.epoch
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		MsgsSent:   e.c.msgsSent.Load(),
		BytesSent:  e.c.bytesSent.Load(),
		MsgsRecv:   e.c.msgsRecv.Load(),
		BytesRecv:  e.c.bytesRecv.Load(),
		SendErrors: e.c.sendErrors.Load(),
		Duplicates: e.c.duplicates.Load(),
		Stale:      e.c.stale.Load(),
		Deferred:   e.c.deferred.Load(),
		Rejected:   e.c.rejected.Load(),
	}
}

// SetTopology replaces the node's topology (after a re-route). Open
// collectives keep the topology they started with; move to a new epoch to
// restart them over the new tree.
func (e *Engine) SetTopology(t Topology) error {
	p, err := newTopo(e.id, t)
	if err != nil {
		return fmt.Errorf("set topology: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.topo = p
	return nil
}

// SetEpoch moves the engine to a newer epoch. Every open collective of an
// older epoch is aborted: each local member that contributed to it gets a
// result with Err == ErrAborted, and the puts a node had sent up with an
// aborted fence are kept for the next fence. Messages of the new epoch
// that arrived early are then handled. An older epoch is an error; the
// current one is a no-op.
func (e *Engine) SetEpoch(epoch uint64) error {
	var fx effects
	e.mu.Lock()
	if epoch < e.epoch {
		cur := e.epoch
		e.mu.Unlock()
		return fmt.Errorf("set epoch %d (at %d): %w", epoch, cur, ErrStaleEpoch)
	}
	if epoch == e.epoch {
		e.mu.Unlock()
		return nil
	}
	for _, c := range e.colls {
		for _, m := range sortedKeys(c.local) {
			fx.results = append(fx.results, Result{ID: c.id, Op: c.op, Member: m, Err: ErrAborted})
		}
		for k, v := range c.inflight {
			if _, newer := e.pending[k]; !newer {
				e.pending[k] = v
			}
		}
	}
	e.colls = make(map[CollID]*coll)
	e.done = doneSet{}
	e.epoch = epoch
	old := e.deferred
	e.deferred = nil
	for _, d := range old {
		switch {
		case d.epoch < epoch:
			e.c.stale.Add(1)
		case d.epoch > epoch:
			e.deferred = append(e.deferred, d)
		default:
			if err := e.handleLocked(d.from, d.msg, &fx); err != nil {
				e.c.rejected.Add(1)
			}
		}
	}
	e.mu.Unlock()
	return e.apply(&fx)
}

// Contribute enters a local member into collective id. data is copied.
// For OpBroadcast only the root contributes, and data is the value sent;
// for OpBarrier and OpFence data is ignored. A member that already
// contributed gets ErrDuplicate, a collective that finished here gets
// ErrFinished, and an id of another epoch than the engine's gets
// ErrStaleEpoch or ErrFutureEpoch; in all these cases nothing changes.
// The error of a failed Send is returned too, after the contribution was
// recorded.
func (e *Engine) Contribute(id CollID, op Op, member int, data []byte) error {
	var fx effects
	e.mu.Lock()
	err := e.contributeLocked(id, op, member, data, &fx)
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("contribute %s %v member %d at node %d: %w", op, id, member, e.id, err)
	}
	return e.apply(&fx)
}

func (e *Engine) contributeLocked(id CollID, op Op, member int, data []byte, fx *effects) error {
	if !op.valid() {
		return fmt.Errorf("%w: unknown operation %d", ErrProtocol, op)
	}
	if id.Epoch < e.epoch {
		return ErrStaleEpoch
	}
	if id.Epoch > e.epoch {
		return ErrFutureEpoch
	}
	if op == OpBroadcast && !e.topo.isRoot() {
		return ErrNotRoot
	}
	if e.done.has(id.Seq) {
		e.c.duplicates.Add(1)
		return ErrFinished
	}
	if op == OpBroadcast {
		if c, ok := e.colls[id]; ok && c.op != op {
			return ErrOpMismatch
		}
		msg := header(kindDown, op, id).Bytes(data).Data()
		e.finishDown(e.topo, id, op, msg, fx, func(m int) Result {
			return Result{ID: id, Op: op, Member: m, Data: msg[len(msg)-len(data):]}
		})
		return nil
	}
	if _, ok := e.topo.memberSet[member]; !ok {
		return ErrNotMember
	}
	c, err := e.open(id, op)
	if err != nil {
		return err
	}
	if _, ok := c.t.memberSet[member]; !ok {
		return ErrNotMember
	}
	if _, dup := c.local[member]; dup || c.sentUp {
		e.c.duplicates.Add(1)
		return ErrDuplicate
	}
	c.local[member] = append([]byte{}, data...)
	return e.advance(c, fx)
}

// open returns the state of collective id, creating it.
func (e *Engine) open(id CollID, op Op) (*coll, error) {
	if c, ok := e.colls[id]; ok {
		if c.op != op {
			return nil, ErrOpMismatch
		}
		return c, nil
	}
	if len(e.colls) >= e.maxOpen {
		return nil, ErrTooManyOpen
	}
	c := &coll{id: id, op: op, t: e.topo, local: make(map[int][]byte), ups: make([]*childUp, len(e.topo.children))}
	e.colls[id] = c
	return c, nil
}

// finish closes collective id at this node.
func (e *Engine) finish(id CollID) {
	delete(e.colls, id)
	e.done.add(id.Seq)
}

// Handle processes one message received from node from. The engine takes
// ownership of msg. A message of an older epoch, a duplicate and a message
// of a finished collective are ignored (nil error, counted in Stats); a
// message of a newer epoch is kept until SetEpoch reaches it. A malformed
// or unexpected message returns an error wrapping ErrProtocol and changes
// nothing. A ring whose members overlap (one member hosted twice) fails at
// the node that sees the overlap: its local members get a result with an
// error wrapping ErrConflict, and Handle returns that error. Errors of the
// sends the message caused are returned too. Handle is safe for concurrent
// use; messages may be handled in any order.
func (e *Engine) Handle(from int, msg []byte) error {
	e.c.msgsRecv.Add(1)
	e.c.bytesRecv.Add(uint64(len(msg)))
	var fx effects
	e.mu.Lock()
	err := e.handleLocked(from, msg, &fx)
	e.mu.Unlock()
	if err != nil {
		e.c.rejected.Add(1)
		return fmt.Errorf("node %d: message from %d: %w", e.id, from, err)
	}
	return e.apply(&fx)
}

// Run reads messages from the engine's transport and handles them until ctx
// ends or the transport is closed, and returns that error. The errors of
// Handle are counted and passed to Config.OnError. Use Run when the
// transport carries only this engine's messages; otherwise call Handle
// from the reader that demultiplexes the transport.
func (e *Engine) Run(ctx context.Context) error {
	for {
		m, err := e.tr.Recv(ctx)
		if err != nil {
			return fmt.Errorf("engine %d: %w", e.id, err)
		}
		if err := e.Handle(m.From, m.Payload); err != nil && e.onError != nil {
			e.onError(m.From, err)
		}
	}
}

// apply performs the sends and deliveries decided under the lock.
func (e *Engine) apply(fx *effects) error {
	var errs []error
	for _, o := range fx.outs {
		if err := e.tr.Send(o.to, o.data); err != nil {
			e.c.sendErrors.Add(1)
			errs = append(errs, fmt.Errorf("send to %d: %w", o.to, err))
			continue
		}
		e.c.msgsSent.Add(1)
		e.c.bytesSent.Add(uint64(len(o.data)))
	}
	if e.onResult != nil {
		for _, r := range fx.results {
			e.onResult(r)
		}
	}
	return errors.Join(errs...)
}

// Message kinds.
const (
	kindUp   = 1 // child to parent: a subtree's aggregated contribution
	kindDown = 2 // parent to child: the outcome
)

func header(kind uint64, op Op, id CollID) *wire.Encoder {
	e := &wire.Encoder{}
	return e.Uint(kind).Uint(uint64(op)).Uint(id.Epoch).Uint(id.Seq)
}

func (e *Engine) handleLocked(from int, msg []byte, fx *effects) error {
	d := wire.NewDecoder(msg)
	kind := d.Uint()
	op := Op(d.Uint())
	id := CollID{Epoch: d.Uint(), Seq: d.Uint()}
	if err := d.Err(); err != nil {
		return fmt.Errorf("%w: header: %v", ErrProtocol, err)
	}
	if (kind != kindUp && kind != kindDown) || !op.valid() || (kind == kindUp && op == OpBroadcast) || (kind == kindDown && op == OpGather) {
		return fmt.Errorf("%w: kind %d op %d", ErrProtocol, kind, op)
	}
	if id.Epoch < e.epoch {
		e.c.stale.Add(1)
		return nil
	}
	if id.Epoch > e.epoch {
		if len(e.deferred) >= e.maxDeferred {
			e.c.stale.Add(1)
			return nil
		}
		e.c.deferred.Add(1)
		e.deferred = append(e.deferred, deferredMsg{from: from, epoch: id.Epoch, msg: msg})
		return nil
	}
	if e.done.has(id.Seq) {
		e.c.duplicates.Add(1)
		return nil
	}
	if kind == kindUp {
		return e.handleUp(from, op, id, d, fx)
	}
	return e.handleDown(from, op, id, d, msg, fx)
}

func (e *Engine) handleUp(from int, op Op, id CollID, d *wire.Decoder, fx *effects) error {
	t := e.topo
	if c, ok := e.colls[id]; ok {
		t = c.t
	}
	ci, ok := t.childIdx[from]
	if !ok {
		return fmt.Errorf("%w: up message from %d, not a child", ErrProtocol, from)
	}
	child := t.children[ci]
	if c, ok := e.colls[id]; ok {
		if c.op != op {
			return fmt.Errorf("%w: %v is a %s, child sent %s", ErrProtocol, id, c.op, op)
		}
		if c.sentUp || c.ups[ci] != nil {
			e.c.duplicates.Add(1)
			return nil
		}
	}
	n := d.Uint()
	if d.Err() == nil && n != uint64(child.Members) {
		return fmt.Errorf("%w: child %d covers %d members, expected %d", ErrProtocol, from, n, child.Members)
	}
	up := &childUp{}
	var err error
	switch op {
	case OpGather, OpAllgather:
		up.entries, err = decodeEntries(d)
		if err == nil && len(up.entries) != child.Members {
			err = fmt.Errorf("%d entries for %d members", len(up.entries), child.Members)
		}
	case OpRing:
		up.ranges, err = decodeRanges(d, child.Members)
	case OpFence:
		up.kv = d.Bytes()
		if d.Err() == nil {
			_, err = indexKV(up.kv)
		}
	}
	if err == nil {
		err = d.Err()
	}
	if err != nil {
		return fmt.Errorf("%w: %s up from %d: %v", ErrProtocol, op, from, err)
	}
	c, err := e.open(id, op)
	if err != nil {
		return err
	}
	c.ups[ci] = up
	c.nUp++
	return e.advance(c, fx)
}

// advance moves collective c on once every local member and every child
// with members contributed: up to the parent, or, at the root, down.
func (e *Engine) advance(c *coll, fx *effects) error {
	if c.sentUp || len(c.local) < len(c.t.members) || c.nUp < c.t.waitChildren {
		return nil
	}
	t := c.t
	switch c.op {
	case OpGather, OpAllgather:
		all, dups := e.mergeEntries(c)
		if dups > 0 {
			e.c.duplicates.Add(uint64(dups))
		}
		if !t.isRoot() {
			enc := header(kindUp, c.op, c.id).Uint(uint64(t.subtree))
			encodeEntries(enc, all)
			e.sendUp(c, enc.Data(), fx)
			if c.op == OpGather {
				e.finish(c.id)
			}
			return nil
		}
		if c.op == OpGather {
			e.finish(c.id)
			fx.results = append(fx.results, Result{ID: c.id, Op: c.op, Member: NodeMember, Entries: all})
			return nil
		}
		enc := header(kindDown, c.op, c.id)
		encodeEntries(enc, all)
		e.finishDown(t, c.id, c.op, enc.Data(), fx, func(m int) Result {
			return Result{ID: c.id, Op: c.op, Member: m, Entries: all}
		})
	case OpBarrier:
		if !t.isRoot() {
			e.sendUp(c, header(kindUp, c.op, c.id).Uint(uint64(t.subtree)).Data(), fx)
			return nil
		}
		e.finishDown(t, c.id, c.op, header(kindDown, c.op, c.id).Data(), fx, func(m int) Result {
			return Result{ID: c.id, Op: c.op, Member: m}
		})
	case OpRing:
		rs, err := buildRing(c)
		if err != nil {
			e.failLocal(c, err, fx)
			return err
		}
		c.ring = rs
		if !t.isRoot() {
			enc := header(kindUp, c.op, c.id).Uint(uint64(t.subtree))
			encodeRanges(enc, rs.groupRanges())
			e.sendUp(c, enc.Data(), fx)
			return nil
		}
		e.finishRing(c, rs.rootNeighbours(), t.subtree, fx)
	case OpFence:
		c.inflight = e.pending
		e.pending = make(map[string][]byte)
		srcs := make([][]byte, 0, 1+len(c.ups))
		srcs = append(srcs, encodeKVMap(c.inflight))
		for _, u := range c.ups {
			if u != nil {
				srcs = append(srcs, u.kv)
			}
		}
		body := mergeKV(srcs)
		if !t.isRoot() {
			e.sendUp(c, header(kindUp, c.op, c.id).Uint(uint64(t.subtree)).Bytes(body).Data(), fx)
			return nil
		}
		msg := header(kindDown, c.op, c.id).Bytes(body).Data()
		seg, err := indexKV(msg[len(msg)-len(body):])
		if err != nil {
			// Our own merge produced it: a bug, not a peer's fault.
			e.failLocal(c, err, fx)
			return err
		}
		e.addSegment(seg)
		e.finishDown(t, c.id, c.op, msg, fx, func(m int) Result {
			return Result{ID: c.id, Op: c.op, Member: m}
		})
	}
	return nil
}

func (e *Engine) sendUp(c *coll, msg []byte, fx *effects) {
	c.sentUp = true
	c.ups = nil
	fx.outs = append(fx.outs, outMsg{to: c.t.parent, data: msg})
}

// failLocal ends collective c here with err for every local member.
func (e *Engine) failLocal(c *coll, err error, fx *effects) {
	for _, m := range sortedKeys(c.local) {
		fx.results = append(fx.results, Result{ID: c.id, Op: c.op, Member: m, Err: err})
	}
	e.finish(c.id)
}

// finishDown forwards msg to every child with members, delivers a result
// to every local member and closes the collective.
func (e *Engine) finishDown(t *topo, id CollID, op Op, msg []byte, fx *effects, result func(m int) Result) {
	for _, ch := range t.children {
		if ch.Members > 0 {
			fx.outs = append(fx.outs, outMsg{to: ch.ID, data: msg})
		}
	}
	for _, m := range t.members {
		fx.results = append(fx.results, result(m))
	}
	e.finish(id)
}

func (e *Engine) handleDown(from int, op Op, id CollID, d *wire.Decoder, msg []byte, fx *effects) error {
	c, open := e.colls[id]
	t := e.topo
	if open {
		t = c.t
	}
	if from != t.parent {
		return fmt.Errorf("%w: down message from %d, not the parent", ErrProtocol, from)
	}
	if op == OpBroadcast {
		if open {
			return fmt.Errorf("%w: broadcast %v collides with an open %s", ErrProtocol, id, c.op)
		}
		v := d.Bytes()
		if err := d.Err(); err != nil {
			return fmt.Errorf("%w: broadcast: %v", ErrProtocol, err)
		}
		e.finishDown(t, id, op, msg, fx, func(m int) Result { return Result{ID: id, Op: op, Member: m, Data: v} })
		return nil
	}
	if !open || !c.sentUp || c.op != op {
		return fmt.Errorf("%w: %s down for %v, which this node has not sent up", ErrProtocol, op, id)
	}
	switch op {
	case OpAllgather:
		all, err := decodeEntries(d)
		if err != nil {
			return fmt.Errorf("%w: allgather down: %v", ErrProtocol, err)
		}
		e.finishDown(t, id, op, msg, fx, func(m int) Result { return Result{ID: id, Op: op, Member: m, Entries: all} })
	case OpBarrier:
		e.finishDown(t, id, op, msg, fx, func(m int) Result { return Result{ID: id, Op: op, Member: m} })
	case OpRing:
		nb, size, err := decodeRingDown(d, len(c.ring.groups))
		if err != nil {
			return fmt.Errorf("%w: ring down: %v", ErrProtocol, err)
		}
		e.finishRing(c, nb, size, fx)
	case OpFence:
		body := d.Bytes()
		if err := d.Err(); err != nil {
			return fmt.Errorf("%w: fence down: %v", ErrProtocol, err)
		}
		seg, err := indexKV(body)
		if err != nil {
			return fmt.Errorf("%w: fence down: %v", ErrProtocol, err)
		}
		e.addSegment(seg)
		e.finishDown(t, id, op, msg, fx, func(m int) Result { return Result{ID: id, Op: op, Member: m} })
	}
	return nil
}

// decodeEntries reads a count and that many (member, value) pairs with
// strictly increasing members. Values alias the message.
func decodeEntries(d *wire.Decoder) ([]Entry, error) {
	k := d.Count(2)
	es := make([]Entry, 0, k)
	prev := -1
	for range k {
		m := d.Uint()
		v := d.Bytes()
		if d.Err() != nil {
			break
		}
		if m > MaxMember || int(m) <= prev {
			return nil, fmt.Errorf("member %d out of order or range", m)
		}
		prev = int(m)
		es = append(es, Entry{Member: prev, Data: v})
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return es, nil
}

func encodeEntries(enc *wire.Encoder, es []Entry) {
	enc.Uint(uint64(len(es)))
	for _, x := range es {
		enc.Uint(uint64(x.Member)).Bytes(x.Data)
	}
}

// mergeEntries merges the local contributions and the children's lists of
// c into one list sorted by member, keeping the first of duplicates (local
// first, then children in order).
func (e *Engine) mergeEntries(c *coll) ([]Entry, int) {
	n := len(c.local)
	for _, u := range c.ups {
		if u != nil {
			n += len(u.entries)
		}
	}
	all := make([]Entry, 0, n)
	for _, m := range c.t.members {
		all = append(all, Entry{Member: m, Data: c.local[m]})
	}
	for _, u := range c.ups {
		if u != nil {
			all = append(all, u.entries...)
		}
	}
	slices.SortStableFunc(all, func(a, b Entry) int { return cmpInt(a.Member, b.Member) })
	out := all[:0]
	dups := 0
	for _, x := range all {
		if len(out) > 0 && out[len(out)-1].Member == x.Member {
			dups++
			continue
		}
		out = append(out, x)
	}
	return out, dups
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// doneSet records the sequence numbers of the finished collectives of the
// current epoch: every seq below `below`, and the ones in `above`.
type doneSet struct {
	below uint64
	above map[uint64]struct{}
}

func (s *doneSet) has(seq uint64) bool {
	if seq < s.below {
		return true
	}
	_, ok := s.above[seq]
	return ok
}

func (s *doneSet) add(seq uint64) {
	if seq < s.below {
		return
	}
	if seq == s.below {
		s.below++
		for {
			if _, ok := s.above[s.below]; !ok {
				return
			}
			delete(s.above, s.below)
			s.below++
		}
	}
	if s.above == nil {
		s.above = make(map[uint64]struct{})
	}
	s.above[seq] = struct{}{}
}
