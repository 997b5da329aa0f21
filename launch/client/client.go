// Package client is the Go library a rank uses to talk to its ftlaunch
// node agent: its place in the job, the node table of I-tuples, barriers,
// a key/value bulletin board, allgather, ring exchange and abort.
//
// A rank started by ftlaunch finds its agent through the socket inherited
// as FTLAUNCH_FD; [Init] connects to it. Every collective call (Barrier,
// Publish, Allgather, Fence, Ring) returns once every rank of the job made
// the same call; all ranks must make their collective calls in the same
// order. A Client is safe for concurrent use, but calls are serialized: the
// protocol has one outstanding request per rank.
//
// Under ftlaunch's restart protocol (`--restart rank`) a rank is told when
// a peer is being replaced: Events delivers Suspend (stop talking to peers,
// reach a safe point, then Ack), Patch (the node table changed: the client
// already holds the new rows; reconnect to the peers they name) and Resume
// (go on). A collective in flight when a recovery begins returns
// ErrRecovering: call it again after Resume. A rank that never reads Events
// is stopped (SIGSTOP) by its agent instead, and continued afterwards.
package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// ErrNotFound is returned by Get for a key nobody put before the last Fence.
var ErrNotFound = errors.New("key not found")

// ErrNotLaunched is returned by Init when the process was not started by
// ftlaunch (FTLAUNCH_FD is not set).
var ErrNotLaunched = errors.New("not started by ftlaunch: FTLAUNCH_FD is not set")

// ErrRecovering is returned by a collective that a recovery interrupted:
// call it again once the Resume event came.
var ErrRecovering = errors.New("ftlaunch client: a recovery began; call again after Resume")

// Event is a recovery event (see Events).
type Event = rankproto.Event

// The kinds of recovery events, Event.Type.
const (
	Suspend = rankproto.TSuspend
	Patch   = rankproto.TPatch
	Resume  = rankproto.TResume
)

// Client is a rank's connection to its node agent.
type Client struct {
	mu     sync.Mutex // one request at a time (held across call)
	conn   net.Conn
	r      *wire.Reader // read by call itself until the reader runs
	info   rankproto.Info
	events chan Event
	// reading: Events was called and a goroutine reads the connection
	// (replies to call, events to Events). Until then call reads its own
	// replies: one goroutine, no hand-off (a hand-off per call cost a
	// 16-rank job's node table about 30 ms on a loaded 2-core machine).
	reading atomic.Bool

	tmu   sync.Mutex // guards table
	table [][]byte

	wmu     sync.Mutex      // serializes writes (requests and acks)
	replies chan wire.Frame // replies, from the reader
	done    chan struct{}   // closed when the reader ended
	readErr error           // why it ended (read once done is closed)
}

// Init connects to the agent through FTLAUNCH_FD and learns the rank's
// place in the job.
func Init() (*Client, error) {
	s := os.Getenv("FTLAUNCH_FD")
	if s == "" {
		return nil, ErrNotLaunched
	}
	fd, err := strconv.Atoi(s)
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("ftlaunch client: FTLAUNCH_FD=%q is not a file descriptor", s)
	}
	f := os.NewFile(uintptr(fd), "ftlaunch")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("ftlaunch client: FTLAUNCH_FD=%d: %w", fd, err)
	}
	return New(conn)
}

// New runs the protocol over an established connection and sends Init.
func New(conn net.Conn) (*Client, error) {
	c := &Client{
		conn: conn, r: wire.NewReader(conn, rankproto.MaxFrame), events: make(chan Event, 16),
		replies: make(chan wire.Frame, 1), done: make(chan struct{}),
	}
	f, err := c.call(rankproto.TInit, nil, rankproto.TInitOK)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if c.info, err = rankproto.DecodeInfo(f.Payload); err != nil {
		conn.Close()
		return nil, fmt.Errorf("ftlaunch client: %w", err)
	}
	return c, nil
}

// Info returns the rank's place in the job.
func (c *Client) Info() rankproto.Info { return c.info }

// Rank returns the rank's number, 0..Size()-1.
func (c *Client) Rank() int { return c.info.Rank }

// Size returns the number of ranks in the job.
func (c *Client) Size() int { return c.info.Size }

// JobID returns the job's opaque identifier.
func (c *Client) JobID() string { return c.info.JobID }

// read is the connection's reader: replies go to the call waiting for
// them, recovery events to Events (a patch is applied to the node table
// first). It ends when the connection does; Events is closed then.
func (c *Client) read() {
	defer close(c.done)
	defer close(c.events)
	for {
		f, err := c.r.Next()
		if err != nil {
			c.readErr = err
			return
		}
		if !rankproto.IsEvent(f.Type) {
			select {
			case c.replies <- f:
			default: // a reply nobody asked for: the agent broke the protocol
				c.readErr = fmt.Errorf("unexpected frame of type %d", f.Type)
				c.conn.Close()
				return
			}
			continue
		}
		ev, err := c.takeEvent(f)
		if err != nil {
			c.readErr = err
			c.conn.Close()
			return
		}
		c.events <- ev
	}
}

// next reads the reply to a call when no reader goroutine runs. Events
// that come first are not for the application (it did not ask for them):
// a patch is applied to the node table; a suspend is left unanswered, and
// the agent stops the rank instead.
func (c *Client) next() (wire.Frame, error) {
	for {
		f, err := c.r.Next()
		if err != nil || !rankproto.IsEvent(f.Type) {
			return f, err
		}
		if _, err := c.takeEvent(f); err != nil {
			return wire.Frame{}, err
		}
	}
}

// takeEvent decodes a recovery event; a patch is applied to the node
// table (and acknowledged) whoever reads it.
func (c *Client) takeEvent(f wire.Frame) (Event, error) {
	ev, err := rankproto.DecodeEvent(f.Type, f.Payload)
	if err == nil && ev.Type == Patch {
		c.applyPatch(ev)
	}
	return ev, err
}

// applyPatch puts a patch's rows into the node table and acknowledges it:
// the rank holds the new table before it is resumed.
func (c *Client) applyPatch(ev Event) {
	c.tmu.Lock()
	for _, row := range ev.Rows {
		if row.Rank >= 0 && row.Rank < len(c.table) {
			c.table[row.Rank] = row.ITuple
		}
	}
	c.tmu.Unlock()
	_ = c.write(rankproto.TAck, rankproto.EncodeAck(Patch, ev.Epoch))
}

func (c *Client) write(typ uint8, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return wire.WriteFrame(c.conn, typ, payload)
}

// Events delivers recovery events in order: Suspend, Patch, Resume. Read
// it from a goroutine of the application's; it is closed when the
// connection to the agent ends. Events are kept only once Events was
// called (it starts the client's reader goroutine); up to 16 wait for the
// application, and one that falls further behind holds up its calls.
func (c *Client) Events() <-chan Event {
	c.mu.Lock() // not while a call reads its reply itself
	defer c.mu.Unlock()
	if !c.reading.Load() {
		c.reading.Store(true)
		go c.read() // ends with the connection (Close)
	}
	return c.events
}

// Ack acknowledges a Suspend event: the rank reached a safe point and
// talks to no peer until Resume. (Patches are acknowledged by the client
// itself, once it holds the new table.)
func (c *Client) Ack(ev Event) error {
	if ev.Type != Suspend {
		return nil
	}
	if err := c.write(rankproto.TAck, rankproto.EncodeAck(ev.Type, ev.Epoch)); err != nil {
		return fmt.Errorf("ftlaunch client: ack: %w", err)
	}
	return nil
}

// Incarnation is this rank's incarnation: 1 for the first process of the
// rank, one more for each time it was started again.
func (c *Client) Incarnation() uint64 { return c.info.Incarnation }

// call sends one request and waits for its reply, which must have type
// want.
func (c *Client) call(typ uint8, payload []byte, want uint8) (wire.Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(typ, payload); err != nil {
		return wire.Frame{}, fmt.Errorf("ftlaunch client: send: %w", err)
	}
	var f wire.Frame
	if c.reading.Load() {
		select {
		case f = <-c.replies:
		case <-c.done:
			return wire.Frame{}, fmt.Errorf("ftlaunch client: receive: %w", c.readErr)
		}
	} else {
		var err error
		if f, err = c.next(); err != nil {
			return wire.Frame{}, fmt.Errorf("ftlaunch client: receive: %w", err)
		}
	}
	switch f.Type {
	case rankproto.TError:
		return wire.Frame{}, fmt.Errorf("ftlaunch client: agent refused the request: %s", f.Payload)
	case rankproto.TRecovering:
		return wire.Frame{}, ErrRecovering
	case want:
		return f, nil
	}
	return wire.Frame{}, fmt.Errorf("ftlaunch client: reply of type %d, want %d", f.Type, want)
}

func (c *Client) values(typ uint8, v []byte) ([][]byte, error) {
	f, err := c.call(typ, rankproto.EncodeValues([][]byte{v}), rankproto.TValues)
	if err != nil {
		return nil, err
	}
	vs, err := rankproto.DecodeValues(f.Payload)
	if err != nil {
		return nil, fmt.Errorf("ftlaunch client: %w", err)
	}
	if len(vs) != c.info.Size {
		return nil, fmt.Errorf("ftlaunch client: %d values for a job of %d ranks", len(vs), c.info.Size)
	}
	return vs, nil
}

// Publish contributes this rank's I-tuple (typically the address it
// listens on) and returns the node table: every rank's I-tuple, by rank.
func (c *Client) Publish(ituple []byte) ([][]byte, error) {
	t, err := c.values(rankproto.TPublish, ituple)
	if err != nil {
		return nil, err
	}
	c.tmu.Lock()
	c.table = t
	c.tmu.Unlock()
	return t, nil
}

// NodeTable returns a copy of the node table: as of the last Publish, with
// the patches received since; nil before Publish.
func (c *Client) NodeTable() [][]byte {
	c.tmu.Lock()
	defer c.tmu.Unlock()
	if c.table == nil {
		return nil
	}
	return append([][]byte(nil), c.table...)
}

// Allgather returns every rank's value, by rank.
func (c *Client) Allgather(v []byte) ([][]byte, error) {
	return c.values(rankproto.TAllgather, v)
}

// Barrier returns once every rank entered it.
func (c *Client) Barrier() error {
	_, err := c.call(rankproto.TBarrier, nil, rankproto.TOK)
	return err
}

// Put stores a key on the bulletin board. Other ranks see it after the
// next Fence.
func (c *Client) Put(key string, value []byte) error {
	_, err := c.call(rankproto.TPut, rankproto.EncodeKV(key, value), rankproto.TOK)
	return err
}

// Fence makes every rank's puts visible to every rank's Get.
func (c *Client) Fence() error {
	_, err := c.call(rankproto.TFence, nil, rankproto.TOK)
	return err
}

// Get reads a key from the board; it is served by the node agent.
func (c *Client) Get(key string) ([]byte, error) {
	f, err := c.call(rankproto.TGet, rankproto.EncodeKV(key, nil), rankproto.TGetOK)
	if err != nil {
		return nil, err
	}
	found, v, err := rankproto.DecodeGetOK(f.Payload)
	if err != nil {
		return nil, fmt.Errorf("ftlaunch client: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("get %q: %w", key, ErrNotFound)
	}
	return v, nil
}

// Ring contributes v and returns the values of the ranks to the left
// (rank-1) and right (rank+1) of this one, wrapping around, as PMIx_Ring.
func (c *Client) Ring(v []byte) (left, right []byte, err error) {
	f, err := c.call(rankproto.TRing, rankproto.EncodeValues([][]byte{v}), rankproto.TRingOK)
	if err != nil {
		return nil, nil, err
	}
	vs, err := rankproto.DecodeValues(f.Payload)
	if err != nil || len(vs) != 2 {
		return nil, nil, fmt.Errorf("ftlaunch client: malformed ring reply (%v)", err)
	}
	return vs[0], vs[1], nil
}

// Abort asks ftlaunch to end the whole job with exit code code (mod 256)
// and msg as the reason. Like MPI_Abort it does not return normally: it
// waits until the launcher terminates the process. It returns an error
// only when the request could not be sent.
func (c *Client) Abort(code int, msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.write(rankproto.TAbort, rankproto.EncodeAbort(code, msg)); err != nil {
		return fmt.Errorf("ftlaunch client: abort: %w", err)
	}
	// The agent never answers; it closes the socket when it terminates
	// the job, and the process is signalled.
	if c.reading.Load() {
		go func() { // events are not for an aborting rank
			for range c.events {
			}
		}()
		<-c.done
	} else {
		for {
			if _, err := c.r.Next(); err != nil {
				break
			}
		}
	}
	os.Exit(code & 0xff)
	return nil
}

// Close closes the connection to the agent and waits for its reader.
func (c *Client) Close() error {
	err := c.conn.Close()
	if c.reading.Load() {
		go func() { // a reader blocked on a full Events ends too
			for range c.events {
			}
		}()
		<-c.done
	}
	return err
}
