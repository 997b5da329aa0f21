//go:build linux

package sshspawn

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func sockopt(t *testing.T, c *net.TCPConn, opt int) int {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := raw.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, opt) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v
}

func TestTuneConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer peer.Close()

	tc := nc.(*net.TCPConn)
	c, err := tuneConn(tc, true, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := sockopt(t, tc, unix.TCP_USER_TIMEOUT); got != 3000 {
		t.Errorf("TCP_USER_TIMEOUT = %d ms, want 3000", got)
	}
	if got := sockopt(t, tc, unix.TCP_NODELAY); got == 0 {
		t.Error("TCP_NODELAY not set")
	}
	// The kernel clears QUICKACK by itself; each read re-arms it.
	for i := 0; i < 3; i++ {
		if _, err := peer.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1)
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
		if got := sockopt(t, tc, unix.TCP_QUICKACK); got == 0 {
			t.Errorf("read %d: TCP_QUICKACK not re-armed", i)
		}
	}

	// Disabled: plain conn, no user timeout.
	nc2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	c2, err := tuneConn(nc2.(*net.TCPConn), false, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, wrapped := c2.(*quickAckConn); wrapped {
		t.Error("conn wrapped although QUICKACK is disabled")
	}
	if got := sockopt(t, nc2.(*net.TCPConn), unix.TCP_USER_TIMEOUT); got != 0 {
		t.Errorf("TCP_USER_TIMEOUT = %d, want unset", got)
	}
}
