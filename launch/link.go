package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// Link message types. Down: front-end (root) to agent. Up: agent to root.
const (
	mSpec       uint8 = 1  // down: job spec and this node's ranks
	mStdin      uint8 = 2  // down: bytes for rank 0's stdin
	mStdinClose uint8 = 3  // down: end of rank 0's stdin
	mSignal     uint8 = 4  // down: deliver a signal to every rank
	mTerminate  uint8 = 5  // down: SIGTERM every rank, SIGKILL after a delay
	mKill       uint8 = 6  // down: SIGKILL every rank now
	mCollResult uint8 = 7  // down: the result of a collective
	mShutdown   uint8 = 8  // down: the job is over; clean up and exit
	mPing       uint8 = 9  // both: heartbeat request
	mPong       uint8 = 10 // both: heartbeat answer
	mOutputAck  uint8 = 11 // down: this many bytes of output were written
	mStarted    uint8 = 32 // up: ranks started, with pids
	mOutput     uint8 = 33 // up: complete lines of one rank's stream
	mExit       uint8 = 34 // up: a rank ended
	mContrib    uint8 = 35 // up: a node's contribution to a collective
	mAbort      uint8 = 36 // up: a rank called Abort
	mStdinAck   uint8 = 37 // up: one stdin chunk was written
	mDone       uint8 = 38 // up: the agent cleaned up and is about to exit
)

// linkMaxFrame bounds frames on agent links. A node table or a fence of a
// large job travels in one frame.
const linkMaxFrame = 64 << 20

// errHeartbeat is returned when a link's peer fell silent.
var errHeartbeat = errors.New("heartbeat timeout: peer silent")

// link is one end of a framed, heartbeated connection between an agent and
// its parent: a socketpair on one machine, an SSH session's stdin and
// stdout across machines. Send may be called from any goroutine; run owns
// reading.
type link struct {
	conn io.ReadWriteCloser
	r    *wire.Reader

	mu  sync.Mutex // serializes writes
	buf []byte

	lastRecv chan struct{} // signalled on every received frame
	busy     atomic.Bool   // the handler is running: we are not reading, so silence is ours
}

func newLink(conn io.ReadWriteCloser) *link {
	return &link{conn: conn, r: wire.NewReader(conn, linkMaxFrame), lastRecv: make(chan struct{}, 1)}
}

// send writes one frame. Frames of concurrent senders never interleave.
func (l *link) send(typ uint8, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = wire.AppendFrame(l.buf[:0], typ, payload)
	_, err := l.conn.Write(l.buf)
	if cap(l.buf) > 1<<20 {
		l.buf = nil
	}
	if err != nil {
		return fmt.Errorf("link send: %w", err)
	}
	return nil
}

// run reads frames and passes each to handle until the connection fails,
// handle returns an error, the peer stays silent for longer than timeout,
// or ctx ends. It answers pings itself, from this same loop, so a wedged
// handler stops the answers. It sends a ping every interval. It closes the
// connection before it returns.
func (l *link) run(ctx context.Context, interval, timeout time.Duration, handle func(typ uint8, p []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- l.heartbeat(ctx, interval, timeout)
	}()
	go func() {
		<-ctx.Done()
		l.conn.Close()
	}()
	var err error
	for {
		var f wire.Frame
		f, err = l.r.Next()
		if err != nil {
			break
		}
		select {
		case l.lastRecv <- struct{}{}:
		default:
		}
		switch f.Type {
		case mPing:
			err = l.send(mPong, nil)
		case mPong:
		default:
			l.busy.Store(true)
			err = handle(f.Type, f.Payload)
			l.busy.Store(false)
			select { // the wait was ours: count the peer as heard now
			case l.lastRecv <- struct{}{}:
			default:
			}
		}
		if err != nil {
			break
		}
	}
	cancel()
	if herr := <-errc; herr != nil {
		err = herr
	}
	return err
}

func (l *link) heartbeat(ctx context.Context, interval, timeout time.Duration) error {
	if interval <= 0 {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	silent := time.NewTimer(timeout)
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.lastRecv:
			silent.Reset(timeout)
		case <-t.C:
			if err := l.send(mPing, nil); err != nil {
				return nil // the reader sees the failure
			}
		case <-silent.C:
			if l.busy.Load() {
				// Our handler holds the reader (back-pressure from the
				// consumer of this link's messages): the peer's frames
				// wait unread in the socket, which is not its silence.
				silent.Reset(timeout)
				continue
			}
			l.conn.Close()
			return errHeartbeat
		}
	}
}
