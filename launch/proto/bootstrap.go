package proto

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ftlaunch/ftlaunch/overlay/secure"
	"github.com/ftlaunch/ftlaunch/overlay/wire"
)

// RootName is the name in the front-end's certificate.
const RootName = "ftlaunch-root"

// ConnectTimeout bounds an agent's connection back to the front-end.
const ConnectTimeout = 15 * time.Second

// Bootstrap is what a remote agent reads from its SSH session's stdin: its
// job credentials and where the front-end listens. It never travels in
// argv or the environment.
type Bootstrap struct {
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
	Group []GroupEntry
	// Job and Node name the agent for a fence (launch/fence) before it
	// has connected back and learnt its job: an agent still connecting
	// when its parent's host crashed was left running past the job's end
	// (docs/chaos.md). "": not known (the agent registers once it is up).
	Job, Node string
}

type GroupEntry struct {
	Name  string
	Idx   int
	Creds []byte
}

func ReadBootstrap(r io.Reader) (*Bootstrap, error) {
	f, err := wire.NewReader(r, secure.MaxCredentialsSize+4096).Next()
	if err != nil {
		return nil, fmt.Errorf("read bootstrap from stdin: %w", err)
	}
	d := wire.NewDecoder(f.Payload)
	b := &Bootstrap{Creds: d.Bytes(), Port: int(d.Uint()), Hosts: d.Strings(), Idx: int(d.Uint()), Parent: d.String()}
	n := d.Count(3)
	for range n {
		b.Group = append(b.Group, GroupEntry{Name: d.String(), Idx: int(d.Uint()), Creds: d.Bytes()})
	}
	b.Inc = d.Uint()
	b.Job, b.Node = d.String(), d.String()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	return b, nil
}

// FrontendAddrs lists where an agent started over SSH may reach the
// front-end: first the address the SSH connection came from (sshd puts it
// in SSH_CONNECTION), then the addresses the front-end listed.
func FrontendAddrs(b *Bootstrap, getenv func(string) string) []string {
	var addrs []string
	if f := strings.Fields(getenv("SSH_CONNECTION")); len(f) == 4 {
		addrs = append(addrs, net.JoinHostPort(f[0], strconv.Itoa(b.Port)))
	}
	for _, h := range b.Hosts {
		addrs = append(addrs, net.JoinHostPort(h, strconv.Itoa(b.Port)))
	}
	return addrs
}

// AdoptWait bounds how long an orphaned child of the root looks for a new
// root before it kills its ranks and exits.
const AdoptWait = 30 * time.Second

// OwnAddrs lists this host's non-loopback addresses, for children whose
// spawner does not tell them where their parent is.
func OwnAddrs() []string {
	var out []string
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, ad := range addrs {
		if ipn, ok := ad.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// Pick selects the entry of a group bootstrap for the node named name.
func (b *Bootstrap) Pick(name string) error {
	if len(b.Group) == 0 {
		return nil
	}
	for _, g := range b.Group {
		if g.Name == name {
			b.Creds, b.Idx, b.Node = g.Creds, g.Idx, g.Name
			return nil
		}
	}
	return fmt.Errorf("bootstrap: no credentials for node %q in a group of %d", name, len(b.Group))
}

func (b *Bootstrap) Encode() []byte {
	var e wire.Encoder
	e.Bytes(b.Creds).Uint(uint64(b.Port)).Strings(b.Hosts).Uint(uint64(b.Idx)).String(b.Parent)
	e.Uint(uint64(len(b.Group)))
	for _, g := range b.Group {
		e.String(g.Name).Uint(uint64(g.Idx)).Bytes(g.Creds)
	}
	e.Uint(b.Inc).String(b.Job).String(b.Node)
	return wire.AppendFrame(nil, MSpec, e.Data())
}
