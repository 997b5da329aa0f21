package secure

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sockoptInt reads an IPPROTO_TCP option of a link made by this package.
func sockoptInt(t *testing.T, c net.Conn, opt int) int {
	t.Helper()
	tc, ok := c.(*tls.Conn).NetConn().(*net.TCPConn)
	if !ok {
		t.Fatalf("link is over %T, not TCP", c.(*tls.Conn).NetConn())
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, opt) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

func TestSocketOptions(t *testing.T) {
	ca := newTestCA(t, "job-sockopt")
	ln := listen(t, issue(t, ca, "server"), WithUserTimeout(3*time.Second))
	acc := acceptAsync(t, ln)
	cc := dial(t, ln.Addr(), issue(t, ca, "client"), WithUserTimeout(1500*time.Millisecond))
	sc := waitAccept(t, acc)
	for _, tc := range []struct {
		side string
		conn net.Conn
		ms   int
	}{{"client", cc, 1500}, {"server", sc, 3000}} {
		if got := sockoptInt(t, tc.conn, unix.TCP_USER_TIMEOUT); got != tc.ms {
			t.Errorf("%s TCP_USER_TIMEOUT = %d ms, want %d", tc.side, got, tc.ms)
		}
		if got := sockoptInt(t, tc.conn, unix.TCP_NODELAY); got == 0 {
			t.Errorf("%s TCP_NODELAY is off", tc.side)
		}
	}
}

// blackhole returns the address of a TCP listener whose accept queue is
// full, so that the kernel drops further SYNs: a connect to it hangs as it
// would towards a dead host.
func blackhole(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "blackhole")
	t.Cleanup(func() { f.Close() })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := (&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}).String()
	// Fill the queue (never accepted) until a plain connect times out.
	for range 8 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return addr
			}
			t.Fatalf("filling the accept queue: %v", err)
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the kernel kept accepting connections into a full queue")
	return ""
}

func TestDialBlackholeHonoursContext(t *testing.T) {
	addr := blackhole(t)
	c := issue(t, newTestCA(t, "job-blackhole"), "client")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Dial(ctx, addr, c)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial to a blackhole: %v, want context.DeadlineExceeded", err)
	}
	if elapsed > waitLimit/2 {
		t.Fatalf("Dial to a blackhole took %v with a 150 ms context", elapsed)
	}
	t.Logf("Dial to a blackhole returned after %v", elapsed)
}
