package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// rootName is the name in the front-end's certificate.
const rootName = "ftlaunch-root"

// connectTimeout bounds an agent's connection back to the front-end.
const connectTimeout = 15 * time.Second

// bootstrap is what a remote agent reads from its SSH session's stdin: its
// job credentials and where the front-end listens. It never travels in
// argv or the environment.
type bootstrap struct {
	Creds  []byte // secure.Credentials, marshalled
	Port   int    // the parent's listening port
	Hosts  []string
	Idx    int    // the agent's index in the job
	Parent string // the parent's certificate name ("": the front-end)
	// Inc is the agent's incarnation on its node (0 or 1: the first; more:
	// started again after the one before was lost). Its hello says it, and
	// its parent takes no other incarnation's connection in its place.
	Inc uint64
	// Group, for one start of several agents with the same stdin (one srun
	// step for many nodes): each agent's entry, found by its node name.
	Group []groupEntry
}

type groupEntry struct {
	Name  string
	Idx   int
	Creds []byte
}

// pick selects the entry of a group bootstrap for the node named name.
func (b *bootstrap) pick(name string) error {
	if len(b.Group) == 0 {
		return nil
	}
	for _, g := range b.Group {
		if g.Name == name {
			b.Creds, b.Idx = g.Creds, g.Idx
			return nil
		}
	}
	return fmt.Errorf("bootstrap: no credentials for node %q in a group of %d", name, len(b.Group))
}

func (b *bootstrap) encode() []byte {
	var e wire.Encoder
	e.Bytes(b.Creds).Uint(uint64(b.Port)).Strings(b.Hosts).Uint(uint64(b.Idx)).String(b.Parent)
	e.Uint(uint64(len(b.Group)))
	for _, g := range b.Group {
		e.String(g.Name).Uint(uint64(g.Idx)).Bytes(g.Creds)
	}
	e.Uint(b.Inc)
	return wire.AppendFrame(nil, mSpec, e.Data())
}

func readBootstrap(r io.Reader) (*bootstrap, error) {
	f, err := wire.NewReader(r, secure.MaxCredentialsSize+4096).Next()
	if err != nil {
		return nil, fmt.Errorf("read bootstrap from stdin: %w", err)
	}
	d := wire.NewDecoder(f.Payload)
	b := &bootstrap{Creds: d.Bytes(), Port: int(d.Uint()), Hosts: d.Strings(), Idx: int(d.Uint()), Parent: d.String()}
	n := d.Count(3)
	for range n {
		b.Group = append(b.Group, groupEntry{Name: d.String(), Idx: int(d.Uint()), Creds: d.Bytes()})
	}
	b.Inc = d.Uint()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return b, nil
}

// frontendAddrs lists where an agent started over SSH may reach the
// front-end: first the address the SSH connection came from (sshd puts it
// in SSH_CONNECTION), then the addresses the front-end listed.
func frontendAddrs(b *bootstrap, getenv func(string) string) []string {
	var addrs []string
	if f := strings.Fields(getenv("SSH_CONNECTION")); len(f) == 4 {
		addrs = append(addrs, net.JoinHostPort(f[0], strconv.Itoa(b.Port)))
	}
	for _, h := range b.Hosts {
		addrs = append(addrs, net.JoinHostPort(h, strconv.Itoa(b.Port)))
	}
	return addrs
}

// connectBack opens the agent's link to its parent over TCP with mutual
// TLS and introduces the agent with h.
func connectBack(ctx context.Context, b *bootstrap, creds *secure.Credentials, h hello) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	parent := b.Parent
	if parent == "" {
		parent = rootName
	}
	var errs []error
	for _, addr := range frontendAddrs(b, os.Getenv) {
		conn, err := secure.Dial(ctx, addr, creds, secure.WithPeerName(parent))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if err := wire.WriteFrame(conn, mHello, h.encode()); err != nil {
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
