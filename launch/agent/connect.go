package agent

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/ftlaunch/ftlaunch/launch/proto"
	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// connectBack opens the agent's link to its parent over TCP with mutual
// TLS and introduces the agent with h; getenv gives SSH_CONNECTION, the
// address the parent's SSH session came from.
func connectBack(ctx context.Context, b *proto.Bootstrap, creds *secure.Credentials, h proto.Hello, getenv func(string) string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, proto.ConnectTimeout)
	defer cancel()
	parent := b.Parent
	if parent == "" {
		parent = proto.RootName
	}
	var errs []error
	for _, addr := range proto.FrontendAddrs(b, getenv) {
		conn, err := secure.Dial(ctx, addr, creds, secure.WithPeerName(parent))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if err := wire.WriteFrame(conn, proto.MHello, h.Encode()); err != nil {
			conn.Close()
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		return conn, nil
	}
	if len(errs) == 0 {
		return nil, errors.New("connect to the parent: no address to try (SSH_CONNECTION unset)")
	}
	return nil, fmt.Errorf("connect to the parent %s: %w", parent, errors.Join(errs...))
}
