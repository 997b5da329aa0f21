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
package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/ftlaunch/ftlaunch/launch/rankproto"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// ErrNotFound is returned by Get for a key nobody put before the last Fence.
var ErrNotFound = errors.New("key not found")

// ErrNotLaunched is returned by Init when the process was not started by
// ftlaunch (FTLAUNCH_FD is not set).
var ErrNotLaunched = errors.New("not started by ftlaunch: FTLAUNCH_FD is not set")

// Client is a rank's connection to its node agent.
type Client struct {
	mu    sync.Mutex
	conn  net.Conn
	r     *wire.Reader
	info  rankproto.Info
	table [][]byte
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
	c := &Client{conn: conn, r: wire.NewReader(conn, rankproto.MaxFrame)}
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

// call sends one request and reads its reply, which must have type want.
func (c *Client) call(typ uint8, payload []byte, want uint8) (wire.Frame, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := wire.WriteFrame(c.conn, typ, payload); err != nil {
		return wire.Frame{}, fmt.Errorf("ftlaunch client: send: %w", err)
	}
	f, err := c.r.Next()
	if err != nil {
		return wire.Frame{}, fmt.Errorf("ftlaunch client: receive: %w", err)
	}
	if f.Type == rankproto.TError {
		return wire.Frame{}, fmt.Errorf("ftlaunch client: agent refused the request: %s", f.Payload)
	}
	if f.Type != want {
		return wire.Frame{}, fmt.Errorf("ftlaunch client: reply of type %d, want %d", f.Type, want)
	}
	return f, nil
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
	c.mu.Lock()
	c.table = t
	c.mu.Unlock()
	return t, nil
}

// NodeTable returns the node table of the last Publish, or nil before it.
func (c *Client) NodeTable() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.table
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
	if err := wire.WriteFrame(c.conn, rankproto.TAbort, rankproto.EncodeAbort(code, msg)); err != nil {
		return fmt.Errorf("ftlaunch client: abort: %w", err)
	}
	// The agent never answers; it closes the socket when it terminates
	// the job, and the process is signalled.
	for {
		if _, err := c.r.Next(); err != nil {
			os.Exit(code & 0xff)
		}
	}
}

// Close closes the connection to the agent.
func (c *Client) Close() error { return c.conn.Close() }
