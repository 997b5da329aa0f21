//go:build !linux

package secure

import (
	"net"
	"syscall"
	"time"
)

// TCP_USER_TIMEOUT is Linux-only; elsewhere links rely on heartbeats alone.

func userTimeoutControl(time.Duration) func(network, address string, rc syscall.RawConn) error {
	return nil
}

func setUserTimeout(*net.TCPConn, time.Duration) error { return nil }
