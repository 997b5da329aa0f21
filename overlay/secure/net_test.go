package secure

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// waitLimit bounds every wait in these tests; reaching it is a failure.
const waitLimit = 10 * time.Second

// rejects collects a listener's failed handshakes.
type rejects chan error

func (r rejects) option() Option {
	return WithRejectFunc(func(_ net.Addr, err error) {
		select {
		case r <- err:
		default: // the test is not looking; never block the listener
		}
	})
}

// wait returns the next reported rejection.
func (r rejects) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r:
		return err
	case <-time.After(waitLimit):
		t.Fatal("no rejected handshake reported")
		return nil
	}
}

func listen(t *testing.T, c *Credentials, opts ...Option) net.Listener {
	t.Helper()
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", c, opts...)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		if err := ln.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return ln
}

type acceptResult struct {
	conn net.Conn
	err  error
}

// acceptAsync runs one Accept in a goroutine the test waits for.
func acceptAsync(t *testing.T, ln net.Listener) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := ln.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

func waitAccept(t *testing.T, ch <-chan acceptResult) net.Conn {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Accept: %v", r.err)
		}
		t.Cleanup(func() { r.conn.Close() })
		return r.conn
	case <-time.After(waitLimit):
		t.Fatal("Accept did not return")
		return nil
	}
}

func dial(t *testing.T, addr net.Addr, c *Credentials, opts ...Option) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	conn, err := Dial(ctx, addr.String(), c, opts...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func checkPeer(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	got, err := PeerName(conn)
	if err != nil {
		t.Fatalf("PeerName: %v", err)
	}
	if got != want {
		t.Fatalf("PeerName = %q, want %q", got, want)
	}
}

func TestMutualAuth(t *testing.T) {
	ca := newTestCA(t, "job-mutual")
	server, client := issue(t, ca, "parent"), issue(t, ca, "child")
	ln := listen(t, server)
	acc := acceptAsync(t, ln)
	cc := dial(t, ln.Addr(), client, WithPeerName("parent"))
	sc := waitAccept(t, acc)
	checkPeer(t, cc, "parent")
	checkPeer(t, sc, "child")

	if st := cc.(*tls.Conn).ConnectionState(); st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != ALPN || st.DidResume {
		t.Errorf("version %#x, protocol %q, resumed %v", st.Version, st.NegotiatedProtocol, st.DidResume)
	}
	// Data flows both ways, and nothing but data follows the acceptance.
	if _, err := cc.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(sc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("server read %q, %v", buf, err)
	}
	if _, err := sc.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(cc, buf); err != nil || string(buf) != "pong" {
		t.Fatalf("client read %q, %v", buf, err)
	}
}

func TestRestoredCAInteroperates(t *testing.T) {
	ca := newTestCA(t, "job-restore")
	restored, err := UnmarshalCA(ca.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, issue(t, ca, "old"))
	acc := acceptAsync(t, ln)
	dial(t, ln.Addr(), issue(t, restored, "replacement"))
	checkPeer(t, waitAccept(t, acc), "replacement")
}

func TestWrongPeerNameRefused(t *testing.T) {
	ca := newTestCA(t, "job-name")
	rej := make(rejects, 4)
	ln := listen(t, issue(t, ca, "impostor"), rej.option())
	_, err := Dial(context.Background(), ln.Addr().String(), issue(t, ca, "child"), WithPeerName("parent"))
	if !errors.Is(err, ErrPeerRefused) {
		t.Fatalf("Dial to the wrong agent: %v, want ErrPeerRefused", err)
	}
	if err := rej.wait(t); err == nil {
		t.Fatal("server reported a nil rejection")
	}
}

// TestOtherJobRefused checks both directions: a client of another job is
// refused by the server, and a server of another job by the client; in
// both cases neither side gets a link.
func TestOtherJobRefused(t *testing.T) {
	jobA, jobB := newTestCA(t, "job-A"), newTestCA(t, "job-B")
	for _, tc := range []struct {
		name           string
		server, client *Credentials
	}{
		{"foreign client", issue(t, jobA, "server"), issue(t, jobB, "client")},
		{"foreign server", issue(t, jobB, "server"), issue(t, jobA, "client")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rej := make(rejects, 4)
			ln := listen(t, tc.server, rej.option())
			acc := acceptAsync(t, ln)
			_, err := Dial(context.Background(), ln.Addr().String(), tc.client)
			if !errors.Is(err, ErrPeerRefused) {
				t.Fatalf("Dial: %v, want ErrPeerRefused", err)
			}
			if err := rej.wait(t); err == nil {
				t.Fatal("server reported a nil rejection")
			}
			// The refused client never reaches Accept: the next link
			// Accept returns is a legitimate one.
			ca := jobA
			if tc.server.JobID() == jobB.JobID() {
				ca = jobB
			}
			dial(t, ln.Addr(), issue(t, ca, "legit"))
			checkPeer(t, waitAccept(t, acc), "legit")
		})
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	ca := newTestCA(t, "job-nocert")
	rej := make(rejects, 4)
	ln := listen(t, issue(t, ca, "server"), rej.option())
	acc := acceptAsync(t, ln)

	cfg := issue(t, ca, "client").ClientConfig()
	cfg.Certificates = nil
	conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
	if err == nil {
		// TLS 1.3: the client learns of the refusal on its first read.
		conn.SetDeadline(time.Now().Add(waitLimit))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate read from the server")
	}
	if err := rej.wait(t); err == nil {
		t.Fatal("server reported a nil rejection")
	}
	dial(t, ln.Addr(), issue(t, ca, "legit"))
	checkPeer(t, waitAccept(t, acc), "legit")
}

func TestExpiredCredentialsRefused(t *testing.T) {
	old, err := newJobCA("job-old", time.Now().Add(-10*24*time.Hour), DefaultValidity)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := old.issue("stale", time.Now().Add(-9*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	// Expired credentials still decode.
	if _, err := UnmarshalCredentials(expired.Marshal()); err != nil {
		t.Fatalf("UnmarshalCredentials of expired credentials: %v", err)
	}
	rej := make(rejects, 4)
	ln := listen(t, expired, rej.option())
	if _, err := Dial(context.Background(), ln.Addr().String(), expired); !errors.Is(err, ErrPeerRefused) {
		t.Fatalf("Dial with expired credentials: %v, want ErrPeerRefused", err)
	}
	rej.wait(t)
}

// TestSlowAndGarbageClientsDoNotBlockAccept parks a silent client and a
// garbage-sending client on a listener with a long handshake timeout; a
// legitimate client must still be accepted at once, and Close must abort the
// parked handshakes.
func TestSlowAndGarbageClientsDoNotBlockAccept(t *testing.T) {
	ca := newTestCA(t, "job-slow")
	rej := make(rejects, 8)
	ln, err := Listen(context.Background(), "tcp", "127.0.0.1:0", issue(t, ca, "server"),
		WithHandshakeTimeout(time.Hour), rej.option())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	garbage, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	// A plausible TLS record header announcing a long record, then noise:
	// the server waits for the rest of the record.
	junk := make([]byte, 512)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	if _, err := garbage.Write(append([]byte{0x16, 0x03, 0x01, 0x3f, 0xff}, junk...)); err != nil {
		t.Fatal(err)
	}

	for range 3 {
		acc := acceptAsync(t, ln)
		dial(t, ln.Addr(), issue(t, ca, "legit"))
		checkPeer(t, waitAccept(t, acc), "legit")
	}
	select {
	case err := <-rej:
		t.Fatalf("a parked handshake ended early: %v", err)
	default:
	}

	// Close aborts the parked handshakes: both raw clients see the end.
	closed := make(chan error, 1)
	go func() { closed <- ln.Close() }()
	for _, c := range []net.Conn{silent, garbage} {
		c.SetReadDeadline(time.Now().Add(waitLimit))
		if _, err := io.Copy(io.Discard, c); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("listener Close left a parked handshake open")
			}
		}
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not return")
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
	}
}

func TestHandshakeTimeoutDropsSilentClient(t *testing.T) {
	ca := newTestCA(t, "job-timeout")
	rej := make(rejects, 4)
	ln := listen(t, issue(t, ca, "server"), WithHandshakeTimeout(100*time.Millisecond), rej.option())
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	if err := rej.wait(t); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rejection %v, want a deadline", err)
	}
	silent.SetReadDeadline(time.Now().Add(waitLimit))
	if _, err := io.Copy(io.Discard, silent); err != nil {
		t.Fatalf("silent client: %v, want the server to close", err)
	}
}

func TestNonTLSClientRejected(t *testing.T) {
	ca := newTestCA(t, "job-http")
	rej := make(rejects, 4)
	ln := listen(t, issue(t, ca, "server"), rej.option())
	acc := acceptAsync(t, ln)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := rej.wait(t); err == nil {
		t.Fatal("server reported a nil rejection")
	}
	dial(t, ln.Addr(), issue(t, ca, "legit"))
	checkPeer(t, waitAccept(t, acc), "legit")
}

// TestDialHandshakeHonoursContext dials a TCP server that never speaks TLS.
func TestDialHandshakeHonoursContext(t *testing.T) {
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	c := issue(t, newTestCA(t, "job-mute"), "client")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Dial(ctx, mute.Addr().String(), c)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > waitLimit/2 {
		t.Fatalf("Dial took %v", d)
	}
	// The handshake timeout bounds it as well.
	_, err = Dial(context.Background(), mute.Addr().String(), c, WithHandshakeTimeout(100*time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with a handshake timeout: %v, want context.DeadlineExceeded", err)
	}
}

func TestListenerClose(t *testing.T) {
	ln := listen(t, issue(t, newTestCA(t, "job-close"), "server"))
	acc := acceptAsync(t, ln)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-acc:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("blocked Accept returned %v, want net.ErrClosed", r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("Close did not unblock Accept")
	}
	if err := ln.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestListenBadNetwork(t *testing.T) {
	c := issue(t, newTestCA(t, "job-net"), "server")
	if _, err := Listen(context.Background(), "unix", "/tmp/x", c); err == nil {
		t.Fatal("Listen on unix succeeded")
	}
}

func TestPeerNameOfPlainConn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, err := PeerName(a); err == nil {
		t.Fatal("PeerName of a pipe succeeded")
	}
	if _, err := PeerName(tls.Client(a, &tls.Config{})); err == nil {
		t.Fatal("PeerName before the handshake succeeded")
	}
}

// TestServerRefusalReachesDial covers the TLS 1.3 case where the client
// accepts the server but the server refuses the client's certificate: the
// client's handshake has already succeeded, and only the acceptance byte
// (here, the alert in its place) tells Dial.
func TestServerRefusalReachesDial(t *testing.T) {
	jobA, jobB := newTestCA(t, "job-A"), newTestCA(t, "job-B")
	server := issue(t, jobA, "server")
	// A client that trusts job A but holds a certificate of job B.
	mixed := *issue(t, jobB, "client")
	mixed.jobID, mixed.caCert, mixed.pool = server.jobID, server.caCert, server.pool

	rej := make(rejects, 4)
	ln := listen(t, server, rej.option())
	_, err := Dial(context.Background(), ln.Addr().String(), &mixed)
	if !errors.Is(err, ErrPeerRefused) || !strings.Contains(err.Error(), "server refused our credentials") {
		t.Fatalf("Dial: %v, want the server's refusal", err)
	}
	// crypto/tls withholds a certificate the server's CA list does not
	// cover, so the server sees none; either way it refuses.
	if err := rej.wait(t); err == nil {
		t.Fatal("server reported a nil rejection")
	}
}

// TestPendingHandshakeBound fills the only handshake slot with a silent
// client; a legitimate client waits in the accept queue until the silent
// one times out, then gets through.
func TestPendingHandshakeBound(t *testing.T) {
	ca := newTestCA(t, "job-bound")
	rej := make(rejects, 4)
	ln := listen(t, issue(t, ca, "server"), WithMaxPendingHandshakes(1),
		WithHandshakeTimeout(200*time.Millisecond), rej.option())
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	acc := acceptAsync(t, ln)
	dial(t, ln.Addr(), issue(t, ca, "legit"), WithHandshakeTimeout(waitLimit))
	if err := rej.wait(t); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent client: %v, want a deadline", err)
	}
	checkPeer(t, waitAccept(t, acc), "legit")
}

func TestNewJobCAValidFor(t *testing.T) {
	ca, err := NewJobCAValidFor("job-long", 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ca.NotAfter()); d < 29*24*time.Hour {
		t.Fatalf("CA valid for %v more, want about 30 days", d)
	}
	if _, err := NewJobCAValidFor("job", 0); err == nil {
		t.Fatal("zero validity accepted")
	}
}
