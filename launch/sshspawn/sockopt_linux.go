//go:build linux

package sshspawn

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tuneConn sets TCP_NODELAY, TCP_USER_TIMEOUT (when userTimeout > 0) and,
// when quickAck is set, TCP_QUICKACK, returning a conn that re-arms
// TCP_QUICKACK after every read: Linux clears it again on its own, and
// sshd leaves Nagle on for sessions without a terminal, so without it each
// small request of the handshake waits for a delayed ACK (~40 ms).
func tuneConn(c *net.TCPConn, quickAck bool, userTimeout time.Duration) (net.Conn, error) {
	if err := c.SetNoDelay(true); err != nil {
		return nil, fmt.Errorf("set TCP_NODELAY: %w", err)
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("tcp socket: %w", err)
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if userTimeout > 0 {
			ms := int(userTimeout / time.Millisecond)
			if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, ms); serr != nil {
				serr = fmt.Errorf("set TCP_USER_TIMEOUT: %w", serr)
				return
			}
		}
		if quickAck {
			if serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1); serr != nil {
				serr = fmt.Errorf("set TCP_QUICKACK: %w", serr)
			}
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}
	if !quickAck {
		return c, nil
	}
	return &quickAckConn{TCPConn: c, raw: raw}, nil
}

// quickAckConn sets TCP_QUICKACK again after every read. Its methods are
// as safe for concurrent use as net.TCPConn's.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func (c *quickAckConn) Read(b []byte) (int, error) {
	n, err := c.TCPConn.Read(b)
	if n > 0 {
		// A failure here only costs latency; the read result stands.
		_ = c.raw.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 1)
		})
	}
	return n, err
}
