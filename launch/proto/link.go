package proto

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// linkMaxFrame bounds frames on agent links. A node table or a fence of a
// large job travels in one frame.
const linkMaxFrame = 64 << 20

// SendEach writes one frame on each link: a broadcast's hop to the links
// below (an error shows up in the link's reader).
func SendEach(ls []*Link, typ uint8, p []byte) {
	for _, l := range ls {
		_ = l.Send(typ, p)
	}
}

// LinkTimeout is how long a link's peer may stay silent before the link is
// declared dead: four heartbeat intervals and a second of slack for a
// loaded machine.
func LinkTimeout(hb time.Duration) time.Duration { return 4*hb + time.Second }

// ErrHeartbeat is returned when a link's peer fell silent.
var ErrHeartbeat = errors.New("heartbeat timeout: peer silent")

// UplinkPing is how often a child writes to its parent at least (a ping
// when it has nothing else to say): an eighth of the heartbeat interval
// hb, so that a silent uplink says "stopped" soon after gossip says
// "dead" (ConfirmSilence). The heartbeat's own timeout stays
// LinkTimeout(hb); parents ping their children every hb.
func UplinkPing(hb time.Duration) time.Duration { return hb / 8 }

// ConfirmQuiet is how much longer than its child's ping interval a link
// must have been quiet for gossip's "dead" to count (docs/membership.md):
// with the default 1 s heartbeat, 2 s of silence in all, of which a live
// child's writes must stall for 1.8 s.
const ConfirmQuiet = 1875 * time.Millisecond

// ConfirmSilence applies gossip's hysteresis to the uplink of a child
// gossip finds dead: the child counts as dead when the link has been quiet
// for its ping interval (UplinkPing(hb)) and t.ConfirmQuiet() (left <= 0);
// else left is how much longer it would have to be. A live child is quiet
// at most 1.5 ping intervals (a frame sent just after half an interval
// delays the next ping by one), so its writes must stall for ConfirmQuiet
// less half an interval before it is condemned.
// Only the time this process was awake counts (awake: nil, all of it):
// a peer is not silent while this end could not listen.
func (l *Link) ConfirmSilence(hb time.Duration, t Timing, awake *Awake) (quiet, left time.Duration) {
	quiet = min(l.Quiet(), awake.For(time.Now()))
	return quiet, UplinkPing(hb) + t.ConfirmQuiet() - quiet
}

// ErrGossipDead: gossip declared the peer dead and its link was quiet.
var ErrGossipDead = fmt.Errorf("gossip declared it dead and its link was quiet: %w", ErrHeartbeat)

// Link is one end of a framed, heartbeated connection between an agent and
// its parent: a socketpair on one machine, an SSH session's stdin and
// stdout across machines. Send may be called from any goroutine; run owns
// reading.
type Link struct {
	Conn io.ReadWriteCloser
	R    *wire.Reader

	mu  sync.Mutex // serializes writes
	buf []byte

	heard atomic.Int64 // linkClock when the peer was last heard from
	sent  atomic.Int64 // linkClock when a frame was last written
	busy  atomic.Bool  // the handler is running: we are not reading, so silence is ours
}

// linkEpoch and linkClock give links a cheap monotonic clock: heard and
// sent are stamped on every frame without waking anyone.
var linkEpoch = time.Now()

func linkClock() int64 { return int64(time.Since(linkEpoch)) }

func NewLink(conn io.ReadWriteCloser) *Link {
	l := &Link{Conn: conn, R: wire.NewReader(conn, linkMaxFrame)}
	l.heard.Store(linkClock())
	return l
}

// Send writes one frame. Frames of concurrent senders never interleave.
func (l *Link) Send(typ uint8, payload []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = wire.AppendFrame(l.buf[:0], typ, payload)
	_, err := l.Conn.Write(l.buf)
	if err == nil {
		l.sent.Store(linkClock())
	}
	if cap(l.buf) > 1<<20 {
		l.buf = nil
	}
	if err != nil {
		return fmt.Errorf("link send: %w", err)
	}
	return nil
}

// Await reads frames before the link runs (Run) until handle takes one,
// which it returns: it answers the peer's pings meanwhile (the parent's
// heartbeat while a first frame is late: without an answer it would find
// this end silent) and passes every other frame to handle, which may
// change it, and says whether it is the one awaited.
func (l *Link) Await(handle func(f *wire.Frame) (bool, error)) (wire.Frame, error) {
	for {
		f, err := l.R.Next()
		if err != nil {
			return f, err
		}
		l.heard.Store(linkClock())
		switch f.Type {
		case MPing:
			err = l.Send(MPong, nil)
		case MPong:
		default:
			var done bool
			if done, err = handle(&f); err == nil && done {
				return f, nil
			}
		}
		if err != nil {
			return f, err
		}
	}
}

// Run reads frames and passes each to handle until the connection fails,
// handle returns an error, the peer stays silent for longer than timeout,
// or ctx ends. Any frame counts as the peer's sign of life. Each end sends
// a ping every interval in which it sent nothing else, so a live peer is
// heard at least every interval without answers; only an end that does not
// ping (interval <= 0) answers pings, with a pong from this loop. It
// closes the connection before it returns.
func (l *Link) Run(ctx context.Context, interval, timeout time.Duration, handle func(typ uint8, p []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- l.heartbeat(ctx, interval, timeout)
	}()
	go func() {
		<-ctx.Done()
		l.Conn.Close()
	}()
	var err error
	for {
		var f wire.Frame
		f, err = l.R.Next()
		if err != nil {
			break
		}
		l.heard.Store(linkClock())
		switch f.Type {
		case MPing:
			if interval <= 0 { // we send no pings of our own: answer
				err = l.Send(MPong, nil)
			}
		case MPong:
		default:
			l.busy.Store(true)
			err = handle(f.Type, f.Payload)
			l.busy.Store(false)
			l.heard.Store(linkClock()) // the wait was ours: count the peer as heard now
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

// heartbeat pings the peer when this end was quiet for an interval, and
// ends the link when the peer was silent for longer than timeout. It wakes
// only for its own deadlines, never per received frame: the reader stamps
// heard, and the silence timer, when it fires early, is re-armed for what
// is left. Pings fall on multiples of interval of the wall clock, so the
// links of one process (and of processes whose clocks agree) ping at the
// same moments: one wake-up for all of them instead of one each.
func (l *Link) heartbeat(ctx context.Context, interval, timeout time.Duration) error {
	if interval <= 0 {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTimer(untilNextMultiple(time.Now(), interval))
	defer tick.Stop()
	silent := time.NewTimer(timeout)
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			// A handler that does not return (a wedged end) stops the
			// pings, so that its peer finds it silent, as it would a dead
			// one.
			if time.Duration(linkClock()-l.sent.Load()) >= interval/2 && !l.busy.Load() {
				if err := l.Send(MPing, nil); err != nil {
					return nil // the reader sees the failure
				}
			}
			tick.Reset(untilNextMultiple(now, interval))
		case <-silent.C:
			if quiet := time.Duration(linkClock() - l.heard.Load()); quiet < timeout {
				silent.Reset(timeout - quiet)
				continue
			}
			if l.busy.Load() {
				// Our handler holds the reader (back-pressure from the
				// consumer of this link's messages): the peer's frames
				// wait unread in the socket, which is not its silence.
				silent.Reset(timeout)
				continue
			}
			l.Conn.Close()
			return ErrHeartbeat
		}
	}
}

// untilNextMultiple returns the time from now to the next multiple of d
// since the zero time (at least d/2 away, so that a late wake-up does not
// ping twice in a row).
func untilNextMultiple(now time.Time, d time.Duration) time.Duration {
	wait := now.Truncate(d).Add(d).Sub(now)
	if wait < d/2 {
		wait += d
	}
	return wait
}

// Quiet is how long the peer has not been heard from (any frame, pings
// included).
func (l *Link) Quiet() time.Duration { return time.Duration(linkClock() - l.heard.Load()) }

// TCPLocalAddr is this end's address of a TCP link (the address its peer
// reached it at, or it accepted the peer on), or "" if it has none (nil,
// or a socketpair's).
func (l *Link) TCPLocalAddr() string {
	if l == nil {
		return ""
	}
	if c, ok := l.Conn.(interface{ LocalAddr() net.Addr }); ok && c.LocalAddr() != nil {
		if _, isTCP := c.LocalAddr().(*net.TCPAddr); isTCP {
			return c.LocalAddr().String()
		}
	}
	return ""
}

// Refused reports whether a TCP connection to addr is refused within a
// second: its host answers and nothing listens there, so the process that
// listened is gone. No answer (a cut-off host) is not a refusal; a
// connection made is closed at once.
func Refused(ctx context.Context, addr string) bool {
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	conn.Close()
	return false
}
