package secure

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// userTimeoutControl returns a net.Dialer Control function setting
// TCP_USER_TIMEOUT before connect, so that it bounds the connect as well.
func userTimeoutControl(d time.Duration) func(network, address string, rc syscall.RawConn) error {
	if d <= 0 {
		return nil
	}
	return func(_, _ string, rc syscall.RawConn) error {
		return setUserTimeoutRaw(rc, d)
	}
}

// setUserTimeout sets TCP_USER_TIMEOUT on an accepted connection.
func setUserTimeout(c *net.TCPConn, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("set TCP_USER_TIMEOUT: %w", err)
	}
	return setUserTimeoutRaw(rc, d)
}

func setUserTimeoutRaw(rc syscall.RawConn, d time.Duration) error {
	ms := int(min(max(d.Milliseconds(), 1), 1<<31-1))
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms)
	}); err != nil {
		return fmt.Errorf("set TCP_USER_TIMEOUT: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("set TCP_USER_TIMEOUT: %w", serr)
	}
	return nil
}
