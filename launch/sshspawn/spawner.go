package sshspawn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"golang.org/x/crypto/ssh"
)

// Defaults for the zero values of Options.
const (
	defaultConnectTimeout = 10 * time.Second
	defaultMaxConcurrent  = 64
	defaultMaxPerHost     = 8
	defaultMaxAttempts    = 10
	defaultBackoffBase    = 25 * time.Millisecond
	defaultBackoffMax     = time.Second
	defaultUserTimeout    = 5 * time.Second
)

// HostKeyPolicy says what to do with a host key that is not on record.
type HostKeyPolicy int

const (
	// HostKeyFromConfig takes StrictHostKeyChecking from the OpenSSH
	// configuration, and HostKeyStrict when it has none.
	HostKeyFromConfig HostKeyPolicy = iota
	// HostKeyStrict refuses unknown and changed keys.
	HostKeyStrict
	// HostKeyAcceptNew records an unknown key in the first known_hosts file
	// and connects (trust on first use); a changed key is still refused.
	HostKeyAcceptNew
	// HostKeyInsecure accepts unknown and changed keys without recording
	// them (StrictHostKeyChecking no). Revoked keys are still refused. For
	// throw-away test clusters only.
	HostKeyInsecure
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sshspawn: spawner closed")

// Options configure a Spawner. The zero value is usable: it reads
// ~/.ssh/config if present, uses ssh-agent when SSH_AUTH_SOCK is set and the
// default identity files, and refuses unknown host keys.
type Options struct {
	// ConfigFile is the OpenSSH client configuration (ssh -F). "" reads
	// ~/.ssh/config when it exists; "none" reads nothing; any other file
	// must exist and parse. Honoured per Host block: HostName, User, Port,
	// IdentityFile, UserKnownHostsFile, StrictHostKeyChecking,
	// ConnectTimeout, ForwardAgent. Other keywords are ignored.
	ConfigFile string
	// HomeDir replaces the user's home directory for "~" and the default
	// files. "" means os.UserHomeDir.
	HomeDir string
	// DefaultUser is the remote user when neither the host argument
	// (user@host) nor the configuration names one. "" means the local user.
	DefaultUser string
	// IdentityFiles are private keys tried before the configuration's
	// IdentityFile entries. When both are empty, ~/.ssh/id_ed25519,
	// id_ecdsa and id_rsa are tried. Missing files are skipped;
	// passphrase-protected ones too (load them into ssh-agent).
	IdentityFiles []string
	// KnownHostsFiles replace UserKnownHostsFile from the configuration
	// (default ~/.ssh/known_hosts). New keys are written to the first one.
	KnownHostsFiles []string
	// HostKeyPolicy overrides StrictHostKeyChecking; see HostKeyPolicy.
	HostKeyPolicy HostKeyPolicy
	// AgentSocket is the ssh-agent socket. "" means $SSH_AUTH_SOCK; "none"
	// disables the agent. Agent keys are tried before identity files.
	AgentSocket string
	// ForwardAgent forwards the agent to every session (also enabled per
	// host by ForwardAgent yes in the configuration), so an interior agent
	// of the launch tree can authenticate to its own children.
	ForwardAgent bool
	// ConnectTimeout bounds one attempt's TCP connect, key exchange and
	// authentication. 0 means the configuration's ConnectTimeout, else 10 s.
	ConnectTimeout time.Duration
	// MaxConcurrent bounds the Start calls in progress at once (0: 64).
	// Established sessions do not count.
	MaxConcurrent int
	// MaxPerHost bounds the unauthenticated connections to one host:port
	// at once (0: 8), below sshd's default MaxStartups of 10. The bound
	// adapts: it halves each time the host drops a connection and grows
	// by one per completed handshake, up to MaxPerHost.
	MaxPerHost int
	// MaxAttempts bounds the connection attempts of one Start (0: 10).
	// Only failures before the key exchange completes are retried: sshd
	// resetting or closing the connection, as it does beyond MaxStartups.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the delay before attempt n+1:
	// min(BackoffMax, BackoffBase·2^(n-1)), scaled by a random factor in
	// [0.5, 1] (0: 25 ms and 1 s). After a drop, the host also gets no new
	// connection from this Spawner for BackoffBase.
	BackoffBase, BackoffMax time.Duration
	// DisableQuickAck leaves TCP_QUICKACK unset (for measurements).
	DisableQuickAck bool
	// UserTimeout is TCP_USER_TIMEOUT on the connection: how long sent data
	// may stay unacknowledged before the connection fails (0: 5 s;
	// negative: not set). It turns a crashed host into an error instead of
	// a connection that hangs while there is data in flight.
	UserTimeout time.Duration
	// Logf, if set, receives a line for each retried attempt. It may be
	// called from several goroutines at once.
	Logf func(format string, args ...any)
}

// Spawner starts commands on remote hosts over SSH. Its methods are safe
// for concurrent use. Close it to end its sessions and agent connection.
type Spawner struct {
	opts      Options
	cfg       *sshConfig
	home      string
	localUser string
	keys      *keyring
	hostKeys  *hostKeyDB
	sem       chan struct{}
	perHost   hostLimiter

	mu       sync.Mutex
	closed   bool
	sessions map[*Session]struct{}
}

// New makes a Spawner. It reads the OpenSSH configuration now; a named
// file that is missing or malformed is an error.
func New(opts Options) (*Spawner, error) {
	if opts.MaxConcurrent < 0 || opts.MaxPerHost < 0 || opts.MaxAttempts < 0 ||
		opts.ConnectTimeout < 0 || opts.BackoffBase < 0 || opts.BackoffMax < 0 {
		return nil, errors.New("sshspawn: negative limit in Options")
	}
	setDefault(&opts.MaxConcurrent, defaultMaxConcurrent)
	setDefault(&opts.MaxPerHost, defaultMaxPerHost)
	setDefault(&opts.MaxAttempts, defaultMaxAttempts)
	setDefault(&opts.BackoffBase, defaultBackoffBase)
	setDefault(&opts.BackoffMax, defaultBackoffMax)
	setDefault(&opts.UserTimeout, defaultUserTimeout)

	home := opts.HomeDir
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("sshspawn: home directory: %w", err)
		}
		home = h
	}
	localUser := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		localUser = u.Username
	}

	cfgFile, named := opts.ConfigFile, opts.ConfigFile != ""
	if !named {
		cfgFile = filepath.Join(home, ".ssh", "config")
	}
	cfg, err := loadConfig(cfgFile, named)
	if err != nil {
		return nil, err
	}

	sock := opts.AgentSocket
	if sock == "" {
		sock = os.Getenv("SSH_AUTH_SOCK")
	} else if sock == "none" {
		sock = ""
	}

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sshspawn: probe key: %w", err)
	}
	probe, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return nil, fmt.Errorf("sshspawn: probe key: %w", err)
	}

	return &Spawner{
		opts:      opts,
		cfg:       cfg,
		home:      home,
		localUser: localUser,
		keys:      &keyring{agentSock: sock, files: make(map[string]fileKey)},
		hostKeys:  &hostKeyDB{probe: probe, cache: make(map[string]*khEntry)},
		sem:       make(chan struct{}, opts.MaxConcurrent),
		perHost:   hostLimiter{max: opts.MaxPerHost, pause: opts.BackoffBase, slots: make(map[string]*hostSlot)},
		sessions:  make(map[*Session]struct{}),
	}, nil
}

func setDefault[T comparable](p *T, def T) {
	var zero T
	if *p == zero {
		*p = def
	}
}

// Close closes every open session (see Session.Close) and the agent
// connection. Later Start calls return ErrClosed, and so do calls in
// progress once they have connected (their session is closed at once).
func (s *Spawner) Close() error {
	s.mu.Lock()
	s.closed = true
	open := make([]*Session, 0, len(s.sessions))
	for ss := range s.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	for _, ss := range open {
		ss.Close()
	}
	return s.keys.close()
}

// Start connects to host ("[user@]name[:port]", name as in the OpenSSH
// configuration), runs argv there through the remote user's shell (quoted
// as by Command), and writes stdin to the command's standard input, which
// then stays open: closing the session is what the remote command sees as
// EOF. ctx bounds the whole start (queueing, retries, handshake, exec); it
// does not bound the returned session's life.
//
// Errors name the host; a *HostKeyError reports an unverifiable host key.
func (s *Spawner) Start(ctx context.Context, host string, argv []string, stdin []byte) (*Session, error) {
	begin := time.Now()
	if len(argv) == 0 {
		return nil, fmt.Errorf("ssh %s: empty command", host)
	}
	if s.isClosed() {
		return nil, ErrClosed
	}
	t, err := s.resolve(host)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", host, err)
	}

	var tm Timings
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ssh %s: waiting for a launch slot: %w", host, ctx.Err())
	}
	defer func() { <-s.sem }()
	tm.Queued = time.Since(begin)

	var client *ssh.Client
	var release func(outcome)
	for attempt := 1; ; attempt++ {
		tm.Attempts = attempt
		c, rel, err := s.connect(ctx, t, &tm)
		if err == nil {
			client, release = c, rel
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ssh %s: %w (attempt %d: %v)", t.addr(), ctx.Err(), attempt, err)
		}
		var re *retryableError
		if !errors.As(err, &re) {
			return nil, err
		}
		if attempt >= s.opts.MaxAttempts {
			return nil, fmt.Errorf("%w (gave up after %d attempts)", re.err, attempt)
		}
		d := s.backoff(attempt)
		if s.opts.Logf != nil {
			s.opts.Logf("ssh %s: attempt %d failed, retrying in %v: %v", t.addr(), attempt, d.Round(time.Millisecond), re.err)
		}
		w := time.Now()
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("ssh %s: %w (waiting to retry after: %v)", t.addr(), ctx.Err(), re.err)
		}
		tm.Backoff += time.Since(w)
	}

	// The per-host slot is held until the command runs: sshd counts a
	// connection as unauthenticated a little longer than the client does.
	sess, err := s.startSession(ctx, client, t, argv, stdin, &tm)
	if err != nil {
		release(outcomeOther)
		client.Close()
		return nil, err
	}
	release(outcomeOK)
	tm.Total = time.Since(begin)
	sess.timings = tm

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		sess.Close()
		return nil, ErrClosed
	}
	s.sessions[sess] = struct{}{}
	s.mu.Unlock()
	return sess, nil
}

func (s *Spawner) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (s *Spawner) forget(ss *Session) {
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
}

func (s *Spawner) backoff(attempt int) time.Duration {
	d := s.opts.BackoffMax
	if shift := attempt - 1; shift < 30 && s.opts.BackoffBase<<shift < d {
		d = s.opts.BackoffBase << shift
	}
	return d/2 + time.Duration(mrand.Int64N(int64(d/2)+1))
}

// retryableError marks a failure worth another attempt.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// dropped reports whether err is the server resetting or closing the
// connection, as sshd does to connections beyond MaxStartups.
func dropped(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNABORTED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// connect makes one attempt: TCP connect, key exchange, host key check and
// authentication, holding a per-host slot throughout. On success the slot
// is still held; the caller releases it.
func (s *Spawner) connect(ctx context.Context, t *target, tm *Timings) (_ *ssh.Client, _ func(outcome), err error) {
	addr := t.addr()
	signers, notes := s.keys.signers(t)
	if len(signers) == 0 {
		return nil, nil, fmt.Errorf("ssh %s: no usable key: %s", addr, s.keys.describe(t, 0, notes))
	}
	algs, err := s.hostKeys.algorithms(t.knownHostsFiles, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh %s: %w", addr, err)
	}

	q := time.Now()
	release, err := s.perHost.acquire(ctx, addr)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh %s: waiting for a handshake slot: %w", addr, err)
	}
	result := outcomeOther
	defer func() {
		if err != nil {
			release(result)
		}
	}()
	tm.Queued += time.Since(q)

	start := time.Now()
	deadline := start.Add(t.connectTimeout)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := dial(dctx, addr, spawn.Redials(ctx))
	if err != nil {
		err = fmt.Errorf("ssh %s: connect: %w", addr, err)
		if errors.Is(err, syscall.ECONNRESET) {
			result = outcomeDropped
			return nil, nil, &retryableError{err}
		}
		return nil, nil, err
	}
	dialed := time.Now()
	spawn.Reached(ctx)
	conn, err := tuneConn(nc.(*net.TCPConn), !s.opts.DisableQuickAck, s.opts.UserTimeout)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	var kexDone atomic.Int64 // when the host key was verified, as nanoseconds after dialed
	cfg := &ssh.ClientConfig{
		User: t.user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			if err := s.hostKeys.verify(t.knownHostsFiles, t.policy, hostname, remote, key); err != nil {
				return err
			}
			kexDone.Store(int64(time.Since(dialed)))
			return nil
		},
		HostKeyAlgorithms: algs,
	}
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	end := time.Now()
	verified := dialed.Add(time.Duration(kexDone.Load()))
	kexOK := kexDone.Load() != 0
	if err != nil {
		var hk *HostKeyError
		switch {
		case errors.As(err, &hk):
			return nil, nil, hk
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil, nil, fmt.Errorf("ssh %s: no answer within the connect timeout of %v: %w", addr, t.connectTimeout, err)
		case !kexOK && dropped(err):
			result = outcomeDropped
			return nil, nil, &retryableError{fmt.Errorf("ssh %s: connection dropped before key exchange completed (sshd MaxStartups?): %w", addr, err)}
		case !kexOK:
			return nil, nil, fmt.Errorf("ssh %s: key exchange: %w", addr, err)
		default:
			return nil, nil, fmt.Errorf("ssh %s: authenticate as %q with %s: %w", addr, t.user, s.keys.describe(t, len(signers), notes), err)
		}
	}
	if !stop() {
		c.Close()
		return nil, nil, ctx.Err()
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("ssh %s: %w", addr, err)
	}
	tm.Dial = dialed.Sub(start)
	tm.Handshake = verified.Sub(dialed)
	tm.Auth = end.Sub(verified)
	return ssh.NewClient(c, chans, reqs), release, nil
}

// hostLimiter bounds concurrent handshakes per address with a window that
// adapts like TCP congestion control: when the host drops a connection, as
// sshd does beyond MaxStartups, the window halves (down to 1) and no new
// handshake starts for a pause; each completed handshake grows it by one
// (up to max). The pause matters: sshd counts a connection as
// unauthenticated a little longer than the client does, so a waiter let in
// at once would be dropped too, and so would the next. Entries of idle
// addresses are dropped, so the map holds only addresses in use. It is safe
// for concurrent use.
type hostLimiter struct {
	max   int
	pause time.Duration
	mu    sync.Mutex
	slots map[string]*hostSlot
}

type hostSlot struct {
	refs       int           // holders and waiters
	inUse      int           // holders
	limit      int           // current window, 1..max
	pauseUntil time.Time     // no new holder before this
	wake       chan struct{} // closed and replaced when a holder leaves
}

// outcome of one handshake, fed back into the window.
type outcome int

const (
	outcomeOther   outcome = iota // failed for another reason: window unchanged
	outcomeOK                     // handshake completed: grow
	outcomeDropped                // the host dropped us: shrink
)

// acquire waits for a handshake slot for key. The returned release must be
// called once with the handshake's outcome.
func (l *hostLimiter) acquire(ctx context.Context, key string) (func(outcome), error) {
	l.mu.Lock()
	hs := l.slots[key]
	if hs == nil {
		hs = &hostSlot{limit: l.max, wake: make(chan struct{})}
		l.slots[key] = hs
	}
	hs.refs++
	for {
		wait := time.Until(hs.pauseUntil)
		if hs.inUse < hs.limit && wait <= 0 {
			break
		}
		wake := hs.wake
		var timer *time.Timer
		var timeout <-chan time.Time
		if wait > 0 {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		l.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-timeout:
		case <-ctx.Done():
			err = ctx.Err()
		}
		if timer != nil {
			timer.Stop()
		}
		l.mu.Lock()
		if err != nil {
			l.unref(key, hs)
			l.mu.Unlock()
			return nil, err
		}
	}
	hs.inUse++
	l.mu.Unlock()

	var once sync.Once
	return func(o outcome) {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			hs.inUse--
			switch o {
			case outcomeOK:
				hs.limit = min(hs.limit+1, l.max)
			case outcomeDropped:
				hs.limit = max(hs.limit/2, 1)
				hs.pauseUntil = time.Now().Add(l.pause)
			}
			close(hs.wake)
			hs.wake = make(chan struct{})
			l.unref(key, hs)
		})
	}, nil
}

// unref drops a reference; l.mu must be held.
func (l *hostLimiter) unref(key string, hs *hostSlot) {
	if hs.refs--; hs.refs == 0 {
		delete(l.slots, key)
	}
}

// redialEvery is how often a connection that asks to reach its host soon
// (spawn.Redials: a fence) is dialled again, in parallel, while no dial
// answered: a lost SYN is retransmitted by the kernel only after a second.
const redialEvery = 250 * time.Millisecond

// maxDials bounds the attempts of one such connection in flight.
const maxDials = 8

// dial connects to addr; with redial, a new attempt starts every
// redialEvery in parallel until one connects (the others are closed) or
// ctx ends.
func dial(ctx context.Context, addr string, redial bool) (net.Conn, error) {
	var d net.Dialer
	if !redial {
		return d.DialContext(ctx, "tcp", addr)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // the other attempts end, and close what they connected
		wg.Wait()
	}()
	type result struct {
		c   net.Conn
		err error
	}
	results := make(chan result)
	start := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := d.DialContext(ctx, "tcp", addr)
			select {
			case results <- result{c, err}:
			case <-ctx.Done():
				if c != nil {
					c.Close()
				}
			}
		}()
	}
	start()
	dials := 1
	tick := time.NewTicker(redialEvery)
	defer tick.Stop()
	for {
		select {
		case r := <-results:
			// A connection, or an answer that is not one (refused,
			// unreachable): either way the host spoke.
			return r.c, r.err
		case <-tick.C:
			if dials < maxDials {
				start()
				dials++
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
