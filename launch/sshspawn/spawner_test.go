package sshspawn

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ftlaunch/ftlaunch/launch/spawn"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// fixture is a client home directory with one identity file and a
// known_hosts file, and a server that trusts the identity.
type fixture struct {
	home, knownHosts string
	signer           ssh.Signer
	srv              *testServer
}

func newFixture(t *testing.T, opts ...serverOpt) *fixture {
	t.Helper()
	home := t.TempDir()
	signer, priv := newEd25519(t)
	writeKey(t, filepath.Join(home, ".ssh", "id_ed25519"), priv, "")
	srv := startServer(t, []ssh.PublicKey{signer.PublicKey()}, opts...)
	kh := filepath.Join(home, ".ssh", "known_hosts")
	if err := os.WriteFile(kh, []byte(srv.knownHostsLine()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &fixture{home: home, knownHosts: kh, signer: signer, srv: srv}
}

// spawner makes a Spawner using only the fixture's home directory.
func (f *fixture) spawner(t *testing.T, mod func(*Options)) *Spawner {
	t.Helper()
	o := Options{HomeDir: f.home, ConfigFile: "none", AgentSocket: "none", BackoffBase: time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	sp, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run starts argv, collects its output and waits for it.
func run(t *testing.T, sp *Spawner, host string, argv []string, stdin []byte) (stdout, stderr string, err error) {
	t.Helper()
	s, err := sp.Start(ctxT(t), host, argv, stdin)
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	s.Stdin().Close()
	var ob, eb bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); io.Copy(&eb, s.Stderr()) }()
	io.Copy(&ob, s.Stdout())
	wg.Wait()
	return ob.String(), eb.String(), s.Wait()
}

func TestStartEchoAndTimings(t *testing.T) {
	f := newFixture(t)
	sp := f.spawner(t, nil)
	s, err := sp.Start(ctxT(t), f.srv.addr, []string{"echo", "hello world", "it's"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(s.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "hello world it's\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if err := s.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
	tm := s.Timings()
	if tm.Attempts != 1 || tm.Dial <= 0 || tm.Handshake <= 0 || tm.Auth <= 0 || tm.Session <= 0 || tm.Total < tm.Launch() {
		t.Errorf("implausible timings %+v", tm)
	}
	if got := f.srv.waitExit(t); got.cmd != `exec echo 'hello world' 'it'\''s'` {
		t.Errorf("server ran %q", got.cmd)
	}
}

func TestStdinPayloadAndExitStatus(t *testing.T) {
	f := newFixture(t)
	sp := f.spawner(t, nil)
	payload := make([]byte, 300<<10) // larger than one SSH packet, with every byte value
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	out, _, err := run(t, sp, f.srv.addr, []string{"sh", "-c", fmt.Sprintf("head -c %d; exit 3", len(payload))}, payload)
	if !bytes.Equal([]byte(out), payload) {
		t.Errorf("stdin round trip: got %d bytes, want %d equal bytes", len(out), len(payload))
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Status != 3 || ee.Host != f.srv.addr {
		t.Fatalf("Wait = %v, want ExitError status 3 naming %s", err, f.srv.addr)
	}
	if !strings.Contains(err.Error(), f.srv.addr) || !strings.Contains(err.Error(), "status 3") {
		t.Errorf("error %q should name host and status", err)
	}
	_, errOut, err := run(t, sp, f.srv.addr, []string{"sh", "-c", "echo oops >&2"}, nil)
	if err != nil || errOut != "oops\n" {
		t.Errorf("stderr = %q, err = %v", errOut, err)
	}
}

func TestStdinStaysOpenUntilClose(t *testing.T) {
	f := newFixture(t)
	sp := f.spawner(t, nil)
	// The remote command reads the payload line, then waits for EOF.
	s, err := sp.Start(ctxT(t), f.srv.addr, []string{"sh", "-c", "read secret; echo got:$secret; cat >/dev/null; echo eof"}, []byte("s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("got:s3cret\n"))
	if _, err := io.ReadFull(s.Stdout(), line); err != nil || string(line) != "got:s3cret\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	// Still running: it has not seen EOF. Close must deliver it.
	select {
	case e := <-f.srv.exits:
		t.Fatalf("command exited before Close: %+v", e)
	default:
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if e := f.srv.waitExit(t); e.status != 0 || e.signal != "" {
		t.Errorf("after Close the command ended with %+v, want a clean exit on EOF", e)
	}
	if err := s.Wait(); !errors.Is(err, ErrNoExitStatus) {
		t.Errorf("Wait after Close = %v, want ErrNoExitStatus", err)
	}
}

func TestKill(t *testing.T) {
	f := newFixture(t)
	sp := f.spawner(t, nil)
	s, err := sp.Start(ctxT(t), f.srv.addr, []string{"sleep", "1000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if e := f.srv.waitExit(t); e.signal != "KILL" {
		t.Errorf("remote command ended with %+v, want SIGKILL", e)
	}
}

func TestAuthSources(t *testing.T) {
	f := newFixture(t)
	// 1. The default identity file in HomeDir (used by newFixture) works.
	sp := f.spawner(t, nil)
	if _, _, err := run(t, sp, f.srv.addr, []string{"true"}, nil); err != nil {
		t.Fatalf("default identity file: %v", err)
	}

	// 2. ssh-agent alone: a keyring served on a unix socket holding the key.
	_, priv := newEd25519(t)
	pub, _ := ssh.NewPublicKey(priv.Public())
	srv := startServer(t, []ssh.PublicKey{pub})
	home := t.TempDir()
	sock := serveAgent(t, priv)
	kh := filepath.Join(home, "kh")
	os.WriteFile(kh, []byte(srv.knownHostsLine()+"\n"), 0o600)
	spA, err := New(Options{HomeDir: home, ConfigFile: "none", AgentSocket: sock, KnownHostsFiles: []string{kh}})
	if err != nil {
		t.Fatal(err)
	}
	defer spA.Close()
	if _, _, err := run(t, spA, srv.addr, []string{"true"}, nil); err != nil {
		t.Fatalf("agent auth: %v", err)
	}

	// 3. A passphrase-protected file is skipped and named; a wrong key fails
	// with an error naming the host, the user and the files.
	_, wrongPriv := newEd25519(t)
	wrong := filepath.Join(home, "wrong")
	writeKey(t, wrong, wrongPriv, "")
	locked := filepath.Join(home, "locked")
	writeKey(t, locked, priv, "pass")
	spW, err := New(Options{HomeDir: home, ConfigFile: "none", AgentSocket: "none", KnownHostsFiles: []string{kh},
		IdentityFiles: []string{locked, wrong}, DefaultUser: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer spW.Close()
	_, err = spW.Start(ctxT(t), srv.addr, []string{"true"}, nil)
	if err == nil {
		t.Fatal("wrong key accepted")
	}
	for _, want := range []string{srv.addr, `"alice"`, wrong, locked + ": protected by a passphrase", "authenticate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// No key at all: refused before connecting.
	spN, _ := New(Options{HomeDir: t.TempDir(), ConfigFile: "none", AgentSocket: "none", KnownHostsFiles: []string{kh}})
	defer spN.Close()
	before := srv.conns.Load()
	if _, err := spN.Start(ctxT(t), srv.addr, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "no usable key") {
		t.Errorf("no keys: err = %v", err)
	}
	if srv.conns.Load() != before {
		t.Error("connected although no key was usable")
	}
}

// serveAgent runs an ssh-agent keyring holding priv on a unix socket.
func serveAgent(t *testing.T, priv any) string {
	t.Helper()
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				agent.ServeAgent(kr, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return sock
}

func TestHostKeyUnknownRefused(t *testing.T) {
	f := newFixture(t)
	os.WriteFile(f.knownHosts, nil, 0o600)
	sp := f.spawner(t, func(o *Options) { o.HostKeyPolicy = HostKeyStrict })
	_, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil)
	var hk *HostKeyError
	if !errors.As(err, &hk) || !errors.Is(err, ErrHostKeyUnknown) {
		t.Fatalf("err = %v, want an unknown-host-key error", err)
	}
	for _, want := range []string{f.srv.addr, f.knownHosts, "not in"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if hk.Host != f.srv.addr || hk.Key == nil {
		t.Errorf("HostKeyError fields: %+v", hk)
	}
	// The default known_hosts file is ~/.ssh/known_hosts; a missing one
	// refuses the same way.
	os.Remove(f.knownHosts)
	if _, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil); !errors.Is(err, ErrHostKeyUnknown) {
		t.Errorf("missing known_hosts: err = %v", err)
	}
}

func TestHostKeyChangedRefusedEvenWithAcceptNew(t *testing.T) {
	f := newFixture(t)
	impostor, _ := newEd25519(t)
	line := fmt.Sprintf("[127.0.0.1]:%d %s", f.srv.port(), ssh.MarshalAuthorizedKey(impostor.PublicKey()))
	os.WriteFile(f.knownHosts, []byte("# comment\n"+line), 0o600)
	for _, p := range []HostKeyPolicy{HostKeyStrict, HostKeyAcceptNew} {
		sp := f.spawner(t, func(o *Options) { o.HostKeyPolicy = p })
		_, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil)
		if !errors.Is(err, ErrHostKeyChanged) {
			t.Fatalf("policy %d: err = %v, want a changed-host-key error", p, err)
		}
		for _, want := range []string{f.srv.addr, f.knownHosts + ":2", "CHANGED"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
	got, _ := os.ReadFile(f.knownHosts)
	if string(got) != "# comment\n"+line {
		t.Errorf("known_hosts modified on refusal:\n%s", got)
	}
	// A revoked key is refused under every policy.
	revoked := "@revoked * " + string(ssh.MarshalAuthorizedKey(f.srv.hostKeys[0].PublicKey()))
	os.WriteFile(f.knownHosts, []byte(revoked), 0o600)
	for _, p := range []HostKeyPolicy{HostKeyAcceptNew, HostKeyInsecure} {
		sp := f.spawner(t, func(o *Options) { o.HostKeyPolicy = p })
		if _, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil); !errors.Is(err, ErrHostKeyRevoked) {
			t.Errorf("policy %d, revoked key: err = %v", p, err)
		}
	}
	os.WriteFile(f.knownHosts, []byte("# comment\n"+line), 0o600)
	// StrictHostKeyChecking no connects anyway.
	sp := f.spawner(t, func(o *Options) { o.HostKeyPolicy = HostKeyInsecure })
	if _, _, err := run(t, sp, f.srv.addr, []string{"true"}, nil); err != nil {
		t.Errorf("insecure policy: %v", err)
	}
}

func TestAcceptNewConcurrent(t *testing.T) {
	f := newFixture(t)
	// Two spawners (separate caches, like two processes) race to record the
	// key in the first file, which lacks a final newline; the second file
	// does not exist and is left alone.
	first := filepath.Join(f.home, "sub", "known_hosts")
	second := filepath.Join(f.home, "absent", "known_hosts")
	os.MkdirAll(filepath.Dir(first), 0o700)
	const otherLine = "otherhost ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPp2DBGSbYCzWNq+0yUxw6HUpXSVfwQqR/GVKRMFkzYV"
	os.WriteFile(first, []byte(otherLine), 0o600)
	mod := func(o *Options) {
		o.HostKeyPolicy = HostKeyAcceptNew
		o.KnownHostsFiles = []string{first, second}
	}
	sp, sp2 := f.spawner(t, mod), f.spawner(t, mod)
	const n = 8
	errs := make(chan error, 2*n)
	for i := 0; i < n; i++ {
		for _, s := range []*Spawner{sp, sp2} {
			go func() {
				_, _, err := run(t, s, f.srv.addr, []string{"true"}, nil)
				errs <- err
			}()
		}
	}
	for i := 0; i < 2*n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	b, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	if want := otherLine + "\n" + f.srv.knownHostsLine() + "\n"; string(b) != want {
		t.Errorf("%s =\n%s\nwant\n%s", first, b, want)
	}
	if _, err := os.Stat(second); !os.IsNotExist(err) {
		t.Errorf("%s was touched: %v", second, err)
	}
	// Now recorded, strict checking accepts it.
	strict := f.spawner(t, func(o *Options) { o.HostKeyPolicy = HostKeyStrict; o.KnownHostsFiles = []string{first} })
	if _, _, err := run(t, strict, f.srv.addr, []string{"true"}, nil); err != nil {
		t.Errorf("strict after accept-new: %v", err)
	}
}

func TestHostKeyAlgorithmFollowsKnownHosts(t *testing.T) {
	// The server offers ed25519 and ECDSA; only the ECDSA key is on
	// record. Without restricting the algorithms the client would pick
	// ed25519 and report a changed key.
	ed, _ := newEd25519(t)
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, _ := ssh.NewSignerFromKey(ek)
	f := newFixture(t, withHostKeys(ec, ed))
	f.srv.hostKeys = []ssh.Signer{ec}
	os.WriteFile(f.knownHosts, []byte(f.srv.knownHostsLine()+"\n"), 0o600)
	sp := f.spawner(t, nil)
	if _, _, err := run(t, sp, f.srv.addr, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRetryOnReset(t *testing.T) {
	f := newFixture(t)
	f.srv.reset.Store(3)
	var mu sync.Mutex
	var logs []string
	sp := f.spawner(t, func(o *Options) {
		o.Logf = func(format string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(format, a...)); mu.Unlock() }
	})
	s, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := s.Timings().Attempts; got != 4 {
		t.Errorf("Attempts = %d, want 4", got)
	}
	mu.Lock()
	if len(logs) != 3 || !strings.Contains(logs[0], "reset by peer") {
		t.Errorf("retry log: %q", logs)
	}
	mu.Unlock()

	f.srv.reset.Store(5)
	sp2 := f.spawner(t, func(o *Options) { o.MaxAttempts = 3 })
	_, err = sp2.Start(ctxT(t), f.srv.addr, []string{"true"}, nil)
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !strings.Contains(err.Error(), f.srv.addr) {
		t.Errorf("err = %v, want giving up after 3 attempts", err)
	}
}

func TestNoRetryOnRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	f := newFixture(t)
	sp := f.spawner(t, nil)
	_, err = sp.Start(ctxT(t), addr, []string{"true"}, nil)
	if err == nil || !strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "gave up") {
		t.Errorf("err = %v, want one failed connect", err)
	}
}

func TestCancellation(t *testing.T) {
	f := newFixture(t)
	f.srv.hang.Store(true)
	sp := f.spawner(t, nil)

	// Cancelled during the handshake with a silent server.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := sp.Start(ctx, f.srv.addr, []string{"true"}, nil)
		errc <- err
	}()
	waitFor(t, func() bool { return f.srv.conns.Load() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled in handshake: err = %v", err)
	}

	// The connect timeout ends a silent handshake too.
	spT := f.spawner(t, func(o *Options) { o.ConnectTimeout = 100 * time.Millisecond })
	if _, err := spT.Start(ctxT(t), f.srv.addr, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "connect timeout") {
		t.Errorf("connect timeout: err = %v", err)
	}

	// Cancelled while backing off between attempts.
	f.srv.hang.Store(false)
	f.srv.reset.Store(1000)
	spB := f.spawner(t, func(o *Options) { o.BackoffBase = time.Hour; o.BackoffMax = time.Hour })
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		_, err := spB.Start(ctx2, f.srv.addr, []string{"true"}, nil)
		errc <- err
	}()
	waitFor(t, func() bool { return f.srv.reset.Load() < 1000 })
	cancel2()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled in backoff: err = %v", err)
	}
}

func TestPerHostLimit(t *testing.T) {
	limit := make(chan int, 64)
	f := newFixture(t, withLimitCh(limit))
	sp := f.spawner(t, func(o *Options) { o.MaxPerHost = 2 })
	const n = 12
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, _, err := run(t, sp, f.srv.addr, []string{"true"}, nil)
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	max := 0
	for len(limit) > 0 {
		max = maxInt(max, <-limit)
	}
	if max > 2 {
		t.Errorf("server saw %d unauthenticated connections at once, want at most 2", max)
	}
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestForwardAgent(t *testing.T) {
	f := newFixture(t)
	_, priv := newEd25519(t)
	pub, _ := ssh.NewPublicKey(priv.Public())
	sock := serveAgent(t, priv)
	sp := f.spawner(t, func(o *Options) { o.AgentSocket = sock; o.ForwardAgent = true })
	if _, _, err := run(t, sp, f.srv.addr, []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case keys := <-f.srv.agentCh:
		if len(keys) != 1 || !bytes.Equal(keys[0].Marshal(), pub.Marshal()) {
			t.Errorf("forwarded agent listed %v, want the agent's one key", keys)
		}
	default:
		t.Fatal("the server could not reach the forwarded agent")
	}
	// Without an agent, forwarding is an error, not silently skipped.
	spN := f.spawner(t, func(o *Options) { o.ForwardAgent = true })
	if _, err := spN.Start(ctxT(t), f.srv.addr, []string{"true"}, nil); err == nil || !strings.Contains(err.Error(), "forward agent") {
		t.Errorf("forwarding without agent: err = %v", err)
	}
}

func TestSpawnerClose(t *testing.T) {
	f := newFixture(t)
	sp := f.spawner(t, nil)
	s, err := sp.Start(ctxT(t), f.srv.addr, []string{"cat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp.Close()
	if e := f.srv.waitExit(t); e.status != 0 {
		t.Errorf("cat after Spawner.Close: %+v", e)
	}
	if err := s.Wait(); !errors.Is(err, ErrNoExitStatus) {
		t.Errorf("Wait = %v", err)
	}
	if _, err := sp.Start(ctxT(t), f.srv.addr, []string{"true"}, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v", err)
	}
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		<-tick.C
	}
}

// TestReached: a start whose context carries a reached callback (a fence:
// spawn.WithReached) says when its TCP connection is up, before the
// handshake (here a silent one); one that never connects does not (a
// refused address: the host answered, an error at once).
func TestReached(t *testing.T) {
	f := newFixture(t)
	f.srv.hang.Store(true)
	sp := f.spawner(t, nil)
	reached := make(chan struct{})
	ctx, cancel := context.WithCancel(spawn.WithReached(ctxT(t), func() { close(reached) }))
	errc := make(chan error, 1)
	go func() {
		_, err := sp.Start(ctx, f.srv.addr, []string{"true"}, nil)
		errc <- err
	}()
	<-reached // while the handshake hangs
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled in handshake: err = %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	called := false
	if _, err := sp.Start(spawn.WithReached(ctxT(t), func() { called = true }), addr, []string{"true"}, nil); err == nil || called {
		t.Errorf("refused: err = %v, reached %v", err, called)
	}
}

// TestRedialConnects: a connection dialled again in parallel (a fence's)
// returns the first that connects, and leaves no attempt behind.
func TestRedialConnects(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dial(ctxT(t), ln.Addr().String(), true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	ctx, cancel := context.WithTimeout(ctxT(t), 3*redialEvery)
	defer cancel()
	// 192.0.2.0/24 (TEST-NET-1) is not routed: SYNs go unanswered, or the
	// route is refused at once; either way no connection.
	if c, err := dial(ctx, "192.0.2.1:22", true); err == nil {
		c.Close()
		t.Errorf("connected to TEST-NET-1")
	}
}
