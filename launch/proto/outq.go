package proto

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

// OutQueue numbers an agent's output frames and keeps them until they are
// acknowledged.
type OutQueue struct {
	mu     sync.Mutex
	next   uint64 // the next frame's number
	Frames []outFrame
}

func NewOutQueue() *OutQueue { return &OutQueue{next: 1} }

// Send numbers one piece of output, keeps it and sends it with send, under
// the queue's lock, so that frames go out in their order.
func (q *OutQueue) Send(rank, stream int, data []byte, send func([]byte)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := encodeOutput(q.next, rank, stream, data)
	q.Frames = append(q.Frames, outFrame{seq: q.next, n: len(data), payload: p})
	q.next++
	send(p)
}

// Ack drops the frames up to seq and returns the credit they held.
func (q *OutQueue) Ack(seq uint64) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if seq >= q.next {
		return 0, fmt.Errorf("acknowledgement of output frame %d, but %d were sent", seq, q.next-1)
	}
	n, i := 0, 0
	for ; i < len(q.Frames) && q.Frames[i].seq <= seq; i++ {
		n += q.Frames[i].n
	}
	q.Frames = q.Frames[i:]
	return n, nil
}

// Resend tells a new root where the unacknowledged output begins and
// sends it again.
func (q *OutQueue) Resend(send func(typ uint8, p []byte)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	first := q.next
	if len(q.Frames) > 0 {
		first = q.Frames[0].seq
	}
	send(MOutputResync, EncodeInt(int64(first)))
	for _, f := range q.Frames {
		send(MOutput, f.payload)
	}
}

// DecodeSeq reads a frame number (encodeInt's encoding).
func DecodeSeq(p []byte) (uint64, error) {
	v, err := DecodeInt(p)
	if err == nil && v < 0 {
		err = fmt.Errorf("negative frame number %d", v)
	}
	return uint64(v), err
}

// Window is a byte-counting semaphore: an agent's output credit.
type Window struct {
	mu     sync.Mutex
	cond   *sync.Cond
	avail  int
	closed bool
}

func NewWindow(n int) *Window {
	w := &Window{avail: n}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Acquire waits until n bytes of credit are free and takes them. It
// returns at once once the window is closed.
func (w *Window) Acquire(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.avail < n && !w.closed {
		w.cond.Wait()
	}
	w.avail -= n
}

// Release returns n bytes of credit.
func (w *Window) Release(n int) {
	w.mu.Lock()
	w.avail += n
	w.mu.Unlock()
	w.cond.Broadcast()
}

// Close unblocks every waiter for good.
func (w *Window) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}

// OutputWindow is how many bytes of output an agent may have in flight
// before the front-end acknowledges them. It bounds the front-end's memory
// when its stdout is slow, and keeps output from filling the link so that
// heartbeats always get through: a rank writing faster than the terminal
// reads is slowed down (back-pressure), never cut off.
const OutputWindow = 4 << 20
