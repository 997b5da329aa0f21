//go:build !linux

package sshspawn

import (
	"fmt"
	"net"
	"time"
)

// tuneConn sets TCP_NODELAY. TCP_QUICKACK and TCP_USER_TIMEOUT are Linux
// options; elsewhere they are not set.
func tuneConn(c *net.TCPConn, quickAck bool, userTimeout time.Duration) (net.Conn, error) {
	if err := c.SetNoDelay(true); err != nil {
		return nil, fmt.Errorf("set TCP_NODELAY: %w", err)
	}
	return c, nil
}
