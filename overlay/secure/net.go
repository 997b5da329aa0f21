package secure

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

const (
	// DefaultUserTimeout is the TCP_USER_TIMEOUT of links: how long sent
	// data may stay unacknowledged before the kernel drops the connection.
	DefaultUserTimeout = 5 * time.Second

	// DefaultHandshakeTimeout bounds the TLS handshake (and the acceptance
	// message that ends it) of a link, on both ends.
	DefaultHandshakeTimeout = 10 * time.Second

	// DefaultMaxPendingHandshakes bounds the handshakes a listener runs at
	// once; further connections wait in the kernel's accept queue.
	DefaultMaxPendingHandshakes = 256

	// acceptByte is what the server writes once it has verified the
	// client, so that Dial returns only links both ends accepted.
	acceptByte = 0x01
)

// Option tunes [Listen] or [Dial].
type Option func(*options)

type options struct {
	userTimeout      time.Duration
	handshakeTimeout time.Duration
	maxPending       int
	peerName         string
	onReject         func(remote net.Addr, err error)
}

func buildOptions(opts []Option) options {
	o := options{
		userTimeout:      DefaultUserTimeout,
		handshakeTimeout: DefaultHandshakeTimeout,
		maxPending:       DefaultMaxPendingHandshakes,
	}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithUserTimeout sets TCP_USER_TIMEOUT of the link's socket (Linux only;
// ignored elsewhere). Zero leaves the kernel default. Default
// [DefaultUserTimeout].
func WithUserTimeout(d time.Duration) Option {
	return func(o *options) { o.userTimeout = max(d, 0) }
}

// WithHandshakeTimeout bounds the handshake; non-positive values keep the
// default, [DefaultHandshakeTimeout].
func WithHandshakeTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.handshakeTimeout = d
		}
	}
}

// WithMaxPendingHandshakes bounds the handshakes a listener runs at once
// ([Listen] only); non-positive values keep [DefaultMaxPendingHandshakes].
func WithMaxPendingHandshakes(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxPending = n
		}
	}
}

// WithPeerName makes [Dial] refuse a server that is not the agent called
// name.
func WithPeerName(name string) Option {
	return func(o *options) { o.peerName = name }
}

// WithRejectFunc makes a listener ([Listen] only) call f for every incoming
// connection whose handshake failed or timed out, for logging and as
// evidence of misconfiguration. f is called from the handshake's goroutine,
// possibly concurrently with itself; it must not block.
func WithRejectFunc(f func(remote net.Addr, err error)) Option {
	return func(o *options) { o.onReject = f }
}

// Dial connects to the agent listening at addr (host:port) with c's
// credentials and returns a link both ends have authenticated. ctx bounds
// the TCP connect and the handshake; the handshake is further bounded by
// the handshake timeout. Cancelling ctx after Dial returned has no effect on
// the link. A refusal of either end's certificate, by either end, gives an
// error wrapping [ErrPeerRefused]; a ctx that ended gives one wrapping its
// cause (such as [context.DeadlineExceeded]).
func Dial(ctx context.Context, addr string, c *Credentials, opts ...Option) (net.Conn, error) {
	o := buildOptions(opts)
	d := net.Dialer{Control: userTimeoutControl(o.userTimeout)}
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if cerr := ctxErr(ctx); cerr != nil {
			// package net reports a deadline as a plain i/o timeout;
			// keep the context's reason visible to errors.Is.
			return nil, fmt.Errorf("secure: dial %s: %w: %w", addr, cerr, err)
		}
		return nil, fmt.Errorf("secure: dial %s: %w", addr, err)
	}
	if tc, ok := raw.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			raw.Close()
			return nil, fmt.Errorf("secure: dial %s: set TCP_NODELAY: %w", addr, err)
		}
	}
	hctx, cancel := context.WithTimeout(ctx, o.handshakeTimeout)
	defer cancel()
	conn := tls.Client(raw, c.clientConfig(o.peerName))
	if err := clientHandshake(hctx, conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("secure: dial %s: %w", addr, err)
	}
	return conn, nil
}

// ctxErr returns why ctx ended, counting a deadline already passed whose
// timer has not yet fired (package net's own timer can fire first).
func ctxErr(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// clientHandshake runs the TLS handshake and waits for the server's
// acceptance byte, both bounded by ctx.
func clientHandshake(ctx context.Context, conn *tls.Conn) error {
	if err := conn.HandshakeContext(ctx); err != nil {
		if cerr := ctxErr(ctx); cerr != nil && !errors.Is(err, cerr) {
			return fmt.Errorf("handshake: %w: %w", cerr, err)
		}
		return fmt.Errorf("handshake: %w", err)
	}
	// Unblock the read below when ctx ends; the AfterFunc goroutine is
	// the context package's and ends with stop or with ctx.
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetReadDeadline(dl); err != nil {
			return fmt.Errorf("set read deadline: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	var b [1]byte
	_, err := conn.Read(b[:])
	stopped := stop()
	switch {
	case err != nil && ctxErr(ctx) != nil:
		return fmt.Errorf("wait for acceptance: %w", ctxErr(ctx))
	case err != nil:
		// crypto/tls reports a received alert as a *net.OpError with
		// Op "remote error"; in TLS 1.3 a refused client certificate
		// shows up only here, after the client's handshake.
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "remote error" {
			return fmt.Errorf("%w: server refused our credentials: %w", ErrPeerRefused, err)
		}
		return fmt.Errorf("wait for acceptance: %w", err)
	case b[0] != acceptByte:
		return fmt.Errorf("unexpected acceptance byte %#x", b[0])
	case !stopped:
		return fmt.Errorf("wait for acceptance: %w", context.Cause(ctx))
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear read deadline: %w", err)
	}
	return nil
}

// Listen listens on network ("tcp", "tcp4" or "tcp6") at addr and returns
// a listener whose Accept returns only links that completed the handshake
// with a client of c's job. ctx bounds only the creation of the listener;
// the listener lives until its Close.
//
// Each accepted TCP connection is handshaken in its own goroutine under the
// handshake timeout, at most [WithMaxPendingHandshakes] at once, so one slow,
// silent or garbage-sending client never delays Accept for the others.
// Failed handshakes are dropped (and reported to [WithRejectFunc]). Close
// stops accepting, aborts pending handshakes, closes links not yet
// returned by Accept, and returns once all of the listener's goroutines
// have ended. The listener is safe for concurrent use.
func Listen(ctx context.Context, network, addr string, c *Credentials, opts ...Option) (net.Listener, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("secure: listen: unsupported network %q", network)
	}
	o := buildOptions(opts)
	lc := net.ListenConfig{}
	ln, err := lc.Listen(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("secure: listen %s %s: %w", network, addr, err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		ln:     ln,
		cfg:    c.ServerConfig(),
		o:      o,
		ctx:    bctx,
		cancel: cancel,
		conns:  make(chan net.Conn),
		failed: make(chan struct{}),
		slots:  make(chan struct{}, o.maxPending),
	}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

// listener implements net.Listener over a TCP listener; see Listen.
type listener struct {
	ln     net.Listener
	cfg    *tls.Config
	o      options
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	conns  chan net.Conn  // authenticated links, handed to Accept
	slots  chan struct{}  // semaphore of running handshakes
	wg     sync.WaitGroup // acceptLoop and handshakes
	failed chan struct{}  // closed when acceptLoop stops on its own

	closeOnce sync.Once
	closeErr  error

	mu  sync.Mutex
	err error // why acceptLoop stopped, before failed is closed
}

// Accept returns the next authenticated link.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.ctx.Done():
		return nil, fmt.Errorf("secure: accept: %w", net.ErrClosed)
	case <-l.failed:
		l.mu.Lock()
		defer l.mu.Unlock()
		return nil, l.err
	}
}

// Close stops the listener and waits for its goroutines. It is idempotent.
func (l *listener) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		if err := l.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			l.closeErr = fmt.Errorf("secure: close listener: %w", err)
		}
		l.wg.Wait()
	})
	return l.closeErr
}

// Addr returns the listening address.
func (l *listener) Addr() net.Addr { return l.ln.Addr() }

// acceptLoop accepts TCP connections and starts a handshake for each. It
// ends when the listener is closed or accepting fails for good.
func (l *listener) acceptLoop() {
	defer l.wg.Done()
	var backoff time.Duration
	for {
		select {
		case l.slots <- struct{}{}:
		case <-l.ctx.Done():
			return
		}
		raw, err := l.ln.Accept()
		if err != nil {
			<-l.slots
			if l.ctx.Err() != nil {
				return
			}
			if isTemporary(err) {
				// Out of file descriptors and the like: wait and retry,
				// as net/http does.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
					continue
				case <-l.ctx.Done():
					t.Stop()
					return
				}
			}
			l.mu.Lock()
			l.err = fmt.Errorf("secure: accept: %w", err)
			l.mu.Unlock()
			close(l.failed)
			return
		}
		backoff = 0
		l.wg.Add(1)
		go l.handshake(raw)
	}
}

// isTemporary reports accept errors worth retrying.
func isTemporary(err error) bool {
	var ne interface{ Temporary() bool }
	return errors.As(err, &ne) && ne.Temporary()
}

// handshake authenticates one accepted connection and hands it to Accept,
// or drops it.
func (l *listener) handshake(raw net.Conn) {
	defer l.wg.Done()
	defer func() { <-l.slots }()
	conn, err := l.serverHandshake(raw)
	if err != nil {
		raw.Close()
		if l.o.onReject != nil && l.ctx.Err() == nil {
			l.o.onReject(raw.RemoteAddr(), err)
		}
		return
	}
	select {
	case l.conns <- conn:
	case <-l.ctx.Done():
		conn.Close()
	}
}

func (l *listener) serverHandshake(raw net.Conn) (*tls.Conn, error) {
	if tc, ok := raw.(*net.TCPConn); ok {
		if err := tc.SetNoDelay(true); err != nil {
			return nil, fmt.Errorf("set TCP_NODELAY: %w", err)
		}
		if err := setUserTimeout(tc, l.o.userTimeout); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.o.handshakeTimeout)
	defer cancel()
	conn := tls.Server(raw, l.cfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	dl, _ := ctx.Deadline()
	if err := conn.SetWriteDeadline(dl); err != nil {
		return nil, fmt.Errorf("set write deadline: %w", err)
	}
	if _, err := conn.Write([]byte{acceptByte}); err != nil {
		return nil, fmt.Errorf("send acceptance: %w", err)
	}
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("clear write deadline: %w", err)
	}
	return conn, nil
}
