package sshspawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Timings break down one Start, so a launcher can calibrate its launch
// model: Dial+Handshake+Auth+Session is the remote launch time of the last
// attempt, Total what the caller waited.
type Timings struct {
	Queued    time.Duration // waiting for a spawner slot and a per-host slot
	Attempts  int           // connection attempts, 1 when the first succeeded
	Backoff   time.Duration // sleeping between attempts
	Dial      time.Duration // TCP connect
	Handshake time.Duration // version and key exchange, up to the host key check
	Auth      time.Duration // from the host key check to authenticated
	Session   time.Duration // channel opened, exec accepted, stdin payload sent
	Total     time.Duration // the whole Start call
}

// Launch is the time from TCP connect to the remote command running, for
// the successful attempt.
func (t Timings) Launch() time.Duration { return t.Dial + t.Handshake + t.Auth + t.Session }

// ErrNoExitStatus is returned (wrapped) by Wait when the session ended
// without the remote command's exit status: the connection was closed or
// lost, or the server did not report it.
var ErrNoExitStatus = errors.New("session ended without an exit status")

// ExitError is returned by Wait when the remote command exits non-zero or is
// killed by a signal.
type ExitError struct {
	Host   string
	Status int    // the exit status (OpenSSH reports 255 when a signal killed it)
	Signal string // the signal that killed the command, as "KILL", or ""
	Msg    string // the server's message, if any
}

func (e *ExitError) Error() string {
	if e.Signal != "" {
		return fmt.Sprintf("ssh %s: remote command killed by signal %s", e.Host, e.Signal)
	}
	return fmt.Sprintf("ssh %s: remote command exited with status %d", e.Host, e.Status)
}

// Session is a remote command started by Start, with its SSH connection.
//
// The remote command's stdout and stderr must both be read (or the
// connection closed): SSH flow control stops the remote command once about
// 2 MiB are unread on either. Wait, Close and Kill may be called from any
// goroutine, more than once, and concurrently with reads.
//
// What the remote side sees: Close sends EOF on the command's stdin and
// closes the connection; sshd then closes the command's pipes, so its reads
// from stdin return EOF and its writes to stdout or stderr fail (EPIPE or
// SIGPIPE). sshd sends no signal (there is no terminal, so no SIGHUP); the
// command must exit on stdin EOF by itself, which `ftlaunch agent` does.
// Kill first asks sshd to send SIGKILL to the command, then closes (OpenSSH
// refuses to signal sessions of root, see ErrSignalRefused). If the
// connection is lost without a FIN (a crashed launcher host), the remote
// side only learns of it once sshd's connection times out.
type Session struct {
	host    string
	sp      *Spawner
	client  *ssh.Client
	sess    *ssh.Session
	stdin   io.WriteCloser
	stdout  io.Reader
	stderr  io.Reader
	timings Timings

	waitOnce  sync.Once
	waitErr   error
	closeOnce sync.Once
	closeErr  error
}

// Host returns the address the session is connected to.
func (s *Session) Host() string { return s.host }

// Stdin returns the command's standard input, after the payload given to
// Start. Its Close sends EOF and leaves the session running.
func (s *Session) Stdin() io.WriteCloser { return s.stdin }

// Stdout returns the command's standard output.
func (s *Session) Stdout() io.Reader { return s.stdout }

// Stderr returns the command's standard error.
func (s *Session) Stderr() io.Reader { return s.stderr }

// Timings returns how long the start took, step by step.
func (s *Session) Timings() Timings { return s.timings }

// Wait waits for the remote command to exit and closes the connection. It
// returns nil for exit status 0, an *ExitError for a failure, and an error
// wrapping ErrNoExitStatus when the connection ended first (after Close or
// Kill, for instance). Every call returns the same result.
func (s *Session) Wait() error {
	s.waitOnce.Do(func() {
		err := s.sess.Wait()
		var ee *ssh.ExitError
		var missing *ssh.ExitMissingError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			s.waitErr = &ExitError{Host: s.host, Status: ee.ExitStatus(), Signal: ee.Signal(), Msg: ee.Msg()}
		case errors.As(err, &missing), errors.Is(err, io.EOF):
			s.waitErr = fmt.Errorf("ssh %s: %w", s.host, ErrNoExitStatus)
		default:
			s.waitErr = fmt.Errorf("ssh %s: wait: %w", s.host, err)
		}
		s.Close()
	})
	return s.waitErr
}

// Close sends EOF on the command's stdin and closes the connection; see
// Session for what the remote command sees. It does not wait for the
// command.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.stdin.Close()
		s.sess.Close()
		if err := s.client.Close(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			s.closeErr = fmt.Errorf("ssh %s: close: %w", s.host, err)
		}
		if s.sp != nil {
			s.sp.forget(s)
		}
	})
	return s.closeErr
}

// ErrSignalRefused is returned (wrapped) by Kill when the server refused to
// signal the command. OpenSSH refuses for logins as root (it runs their
// sessions without privilege separation) and before version 7.9.
var ErrSignalRefused = errors.New("server refused to signal the remote command")

// Kill asks sshd to send SIGKILL to the remote command, then closes the
// session whatever the answer. The signal reaches the command itself
// because Start runs it with exec. When the server refuses (see
// ErrSignalRefused) the command is left to exit on stdin EOF.
func (s *Session) Kill() error {
	ok, err := s.sess.SendRequest("signal", true, ssh.Marshal(struct{ Signal string }{string(ssh.SIGKILL)}))
	cerr := s.Close()
	switch {
	case err != nil && !errors.Is(err, io.EOF):
		return fmt.Errorf("ssh %s: kill: %w", s.host, err)
	case err == nil && !ok:
		return fmt.Errorf("ssh %s: kill: %w; the session was closed instead", s.host, ErrSignalRefused)
	}
	return cerr
}

// startSession opens the session channel, starts the command and writes
// the stdin payload. Cancelling ctx meanwhile closes the connection.
func (s *Spawner) startSession(ctx context.Context, client *ssh.Client, t *target, argv []string, stdin []byte, tm *Timings) (*Session, error) {
	addr := t.addr()
	begin := time.Now()
	stop := context.AfterFunc(ctx, func() { client.Close() })
	defer stop()
	fail := func(step string, err error) (*Session, error) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("ssh %s: %s: %w", addr, step, ctx.Err())
		}
		return nil, fmt.Errorf("ssh %s: %s: %w", addr, step, err)
	}

	sess, err := client.NewSession()
	if err != nil {
		return fail("open session", err)
	}
	if t.forwardAgent {
		if s.keys.agentSock == "" {
			return fail("forward agent", errors.New("no ssh-agent (SSH_AUTH_SOCK unset)"))
		}
		if err := agent.ForwardToRemote(client, s.keys.agentSock); err != nil {
			return fail("forward agent", err)
		}
		if err := agent.RequestAgentForwarding(sess); err != nil {
			return fail("forward agent", err)
		}
	}
	in, err := sess.StdinPipe()
	if err != nil {
		return fail("stdin", err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		return fail("stdout", err)
	}
	errOut, err := sess.StderrPipe()
	if err != nil {
		return fail("stderr", err)
	}
	if err := sess.Start(Command(argv)); err != nil {
		return fail("exec", err)
	}
	if len(stdin) > 0 {
		if _, err := in.Write(stdin); err != nil {
			return fail("write stdin", err)
		}
	}
	if !stop() {
		return fail("start", ctx.Err())
	}
	tm.Session = time.Since(begin)
	return &Session{host: addr, sp: s, client: client, sess: sess, stdin: in, stdout: out, stderr: errOut}, nil
}
