package launch

import (
	"fmt"
	"sync"
)

// Output survives a root failover. Every agent numbers its output frames
// (1, 2, …) and keeps each until the root acknowledges it (mOutputAck
// carries the highest number written, cumulatively); the output window
// bounds what it keeps. The root takes an agent's frames only in order:
// the next number it expects, nothing else. When a new root adopts the
// tree it does not know where each agent's output stands, and frames may
// have died with the old root's socket; every agent then says where its
// unacknowledged output begins (mOutputResync) and sends it all again, in
// order. Copies that were buffered on the way arrive before that and are
// dropped; copies after it are duplicates and are dropped too. So no line
// is lost and none is written twice by one root.

// outFrame is an output frame sent and not yet acknowledged.
type outFrame struct {
	seq     uint64
	n       int // bytes of output, the credit it holds
	payload []byte
}

// outQueue numbers an agent's output frames and keeps them until they are
// acknowledged.
type outQueue struct {
	mu     sync.Mutex
	next   uint64 // the next frame's number
	frames []outFrame
}

func newOutQueue() *outQueue { return &outQueue{next: 1} }

// send numbers one piece of output, keeps it and sends it with send, under
// the queue's lock, so that frames go out in their order.
func (q *outQueue) send(rank, stream int, data []byte, send func([]byte)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := encodeOutput(q.next, rank, stream, data)
	q.frames = append(q.frames, outFrame{seq: q.next, n: len(data), payload: p})
	q.next++
	send(p)
}

// ack drops the frames up to seq and returns the credit they held.
func (q *outQueue) ack(seq uint64) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq >= q.next {
		return 0, fmt.Errorf("acknowledgement of output frame %d, but %d were sent", seq, q.next-1)
	}
	n, i := 0, 0
	for ; i < len(q.frames) && q.frames[i].seq <= seq; i++ {
		n += q.frames[i].n
	}
	q.frames = q.frames[i:]
	return n, nil
}

// resend tells a new root where the unacknowledged output begins and
// sends it again.
func (q *outQueue) resend(send func(typ uint8, p []byte)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	first := q.next
	if len(q.frames) > 0 {
		first = q.frames[0].seq
	}
	send(mOutputResync, encodeInt(int64(first)))
	for _, f := range q.frames {
		send(mOutput, f.payload)
	}
}

// decodeSeq reads a frame number (encodeInt's encoding).
func decodeSeq(p []byte) (uint64, error) {
	v, err := decodeInt(p)
	if err == nil && v < 0 {
		err = fmt.Errorf("negative frame number %d", v)
	}
	return uint64(v), err
}

// takeOutput decides whether the root writes an output frame of agent a:
// only the one it expects next (outNext; 0 before a new root learns it).
func (a *agentHandle) takeOutput(seq uint64) bool {
	if a.outNext == 0 || seq != a.outNext {
		return false
	}
	a.outNext++
	return true
}

// outputResync takes an agent's word on where its resent output begins.
func (a *agentHandle) outputResync(first uint64) {
	if a.outNext == 0 || first > a.outNext {
		a.outNext = first
	}
}

// window is a byte-counting semaphore: an agent's output credit.
type window struct {
	mu     sync.Mutex
	cond   *sync.Cond
	avail  int
	closed bool
}

func newWindow(n int) *window {
	w := &window{avail: n}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// acquire waits until n bytes of credit are free and takes them. It
// returns at once once the window is closed.
func (w *window) acquire(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.avail < n && !w.closed {
		w.cond.Wait()
	}
	w.avail -= n
}

// release returns n bytes of credit.
func (w *window) release(n int) {
	w.mu.Lock()
	w.avail += n
	w.mu.Unlock()
	w.cond.Broadcast()
}

// close unblocks every waiter for good.
func (w *window) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}
