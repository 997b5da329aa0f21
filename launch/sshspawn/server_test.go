package sshspawn

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// testServer is an in-process SSH server (x/crypto/ssh) that runs exec
// requests with /bin/sh -c, as sshd would, so the client is tested end to
// end without OpenSSH.
type testServer struct {
	t        *testing.T
	addr     string
	hostKeys []ssh.Signer
	cfg      *ssh.ServerConfig
	ln       net.Listener
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// Behaviour knobs, set before use.
	reset   atomic.Int32 // reset this many connections before the version exchange
	hang    atomic.Bool  // accept connections and never answer
	limitCh chan int     // if set, receives the number of unauthenticated connections at each accept

	unauth  atomic.Int32
	conns   atomic.Int32  // connections accepted
	exits   chan exitInfo // one per finished command
	agentCh chan []*agent.Key
}

type exitInfo struct {
	cmd    string
	status int
	signal string
}

type serverOpt func(*testServer)

// withLimitCh makes the server report its unauthenticated connections.
func withLimitCh(ch chan int) serverOpt {
	return func(s *testServer) { s.limitCh = ch }
}

// withHostKeys replaces the server's host key.
func withHostKeys(keys ...ssh.Signer) serverOpt {
	return func(s *testServer) { s.hostKeys = keys }
}

func newEd25519(t testing.TB) (ssh.Signer, ed25519.PrivateKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, priv
}

// writeKey writes priv as an OpenSSH private key file, encrypted when
// passphrase is not empty.
func writeKey(t testing.TB, path string, priv any, passphrase string) {
	t.Helper()
	var blk *pem.Block
	var err error
	if passphrase == "" {
		blk, err = ssh.MarshalPrivateKey(priv, "")
	} else {
		blk, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startServer listens on 127.0.0.1:0 and accepts the given client keys.
func startServer(t *testing.T, authorized []ssh.PublicKey, opts ...serverOpt) *testServer {
	t.Helper()
	hk, _ := newEd25519(t)
	ctx, cancel := context.WithCancel(context.Background())
	s := &testServer{
		t: t, hostKeys: []ssh.Signer{hk}, ctx: ctx, cancel: cancel,
		exits: make(chan exitInfo, 64), agentCh: make(chan []*agent.Key, 4),
	}
	for _, o := range opts {
		o(s)
	}
	s.cfg = &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			for _, a := range authorized {
				if bytes.Equal(a.Marshal(), key.Marshal()) {
					return nil, nil
				}
			}
			return nil, errors.New("key not authorized")
		},
	}
	for _, k := range s.hostKeys {
		s.cfg.AddHostKey(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln, s.addr = ln, ln.Addr().String()
	s.wg.Add(1)
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) close() {
	s.cancel()
	s.ln.Close()
	s.wg.Wait()
}

func (s *testServer) serve() {
	defer s.wg.Done()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		conns.Add(1)
		go func() {
			defer conns.Done()
			s.handle(c)
		}()
	}
}

func (s *testServer) handle(c net.Conn) {
	stop := context.AfterFunc(s.ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	if s.reset.Add(-1) >= 0 {
		c.(*net.TCPConn).SetLinger(0) // close with RST, like sshd beyond MaxStartups
		return
	}
	if s.hang.Load() {
		io.Copy(io.Discard, c)
		return
	}
	n := s.unauth.Add(1)
	if s.limitCh != nil {
		s.limitCh <- int(n)
	}
	// The connection stops counting as unauthenticated once the server has
	// accepted a key, before the client learns of it.
	var authed sync.Once
	done := func() { authed.Do(func() { s.unauth.Add(-1) }) }
	cfg := *s.cfg
	cfg.PublicKeyCallback = func(m ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
		p, err := s.cfg.PublicKeyCallback(m, key)
		if err == nil {
			done()
		}
		return p, err
	}
	sc, chans, reqs, err := ssh.NewServerConn(c, &cfg)
	done()
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.session(sc, ch, creqs)
		}()
	}
}

// session serves one session channel: optional agent forwarding, one exec,
// signals.
func (s *testServer) session(sc *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var cmd *exec.Cmd
	done := make(chan struct{})
	agentFwd := false
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				if cmd != nil {
					<-done
				}
				return
			}
			switch req.Type {
			case "auth-agent-req@openssh.com":
				agentFwd = true
				req.Reply(true, nil)
			case "signal":
				var sig struct{ Name string }
				if cmd == nil || ssh.Unmarshal(req.Payload, &sig) != nil || sig.Name != string(ssh.SIGKILL) {
					req.Reply(false, nil)
					continue
				}
				cmd.Process.Signal(syscall.SIGKILL)
				req.Reply(true, nil)
			case "exec":
				var p struct{ Command string }
				if cmd != nil || ssh.Unmarshal(req.Payload, &p) != nil {
					req.Reply(false, nil)
					continue
				}
				if agentFwd {
					s.listForwardedAgent(sc)
				}
				cmd = exec.CommandContext(s.ctx, "/bin/sh", "-c", p.Command)
				stdin, _ := cmd.StdinPipe()
				cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
				if err := cmd.Start(); err != nil {
					req.Reply(false, nil)
					return
				}
				req.Reply(true, nil)
				go func() {
					io.Copy(stdin, ch)
					stdin.Close()
				}()
				go func() {
					defer close(done)
					err := cmd.Wait()
					info := exitInfo{cmd: p.Command}
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						ws := ee.Sys().(syscall.WaitStatus)
						if ws.Signaled() {
							info.signal = map[syscall.Signal]string{syscall.SIGKILL: "KILL", syscall.SIGTERM: "TERM", syscall.SIGPIPE: "PIPE"}[ws.Signal()]
						} else {
							info.status = ws.ExitStatus()
						}
					}
					if info.signal != "" {
						ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
							Signal     string
							CoreDumped bool
							Msg, Lang  string
						}{Signal: info.signal}))
					} else {
						ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(info.status)}))
					}
					ch.Close()
					s.exits <- info
				}()
			default:
				req.Reply(false, nil)
			}
		case <-done:
			return
		}
	}
}

// listForwardedAgent opens an agent channel back to the client, as sshd does
// when a remote program uses SSH_AUTH_SOCK, and reports the keys it lists.
func (s *testServer) listForwardedAgent(sc *ssh.ServerConn) {
	ch, reqs, err := sc.OpenChannel("auth-agent@openssh.com", nil)
	if err != nil {
		s.agentCh <- nil
		return
	}
	go ssh.DiscardRequests(reqs)
	defer ch.Close()
	keys, err := agent.NewClient(ch).List()
	if err != nil {
		keys = nil
	}
	s.agentCh <- keys
}

// knownHostsLine is the known_hosts line for the server's first host key.
func (s *testServer) knownHostsLine() string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", s.port(), bytes.TrimSpace(ssh.MarshalAuthorizedKey(s.hostKeys[0].PublicKey())))
}

func (s *testServer) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// waitExit waits for the next finished command.
func (s *testServer) waitExit(t *testing.T) exitInfo {
	t.Helper()
	select {
	case e := <-s.exits:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the remote command to exit")
	}
	return exitInfo{}
}
