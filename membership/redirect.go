package membership

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// RootName is the front-end's member name in a job's gossip cluster
// (agents use their node names, which never take this form).
const RootName = "ftlaunch-root"

// redirectTransport sends what memberlist addresses to the members named
// in to (packets and streams alike: probes, acks, gossip) to the address
// given there instead of the one they advertise. A front-end with several
// addresses advertises one (memberlist picks the one of its default
// route), which a cluster's hosts may not reach, while every agent knows
// one it does reach (Config.Redirect).
type redirectTransport struct {
	memberlist.NodeAwareTransport
	to map[string]string
}

func (t redirectTransport) addr(a memberlist.Address) memberlist.Address {
	if r, ok := t.to[a.Name]; ok {
		a.Addr = r
	}
	return a
}

func (t redirectTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.NodeAwareTransport.WriteToAddress(b, t.addr(a))
}

func (t redirectTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.NodeAwareTransport.DialAddressTimeout(t.addr(a), timeout)
}

// redirect wraps mc's transport (memberlist's UDP/TCP one if mc has
// none, bound as memberlist would bind it) so that traffic to the members
// named in to goes where to says.
func redirect(mc *memberlist.Config, to map[string]string) error {
	tr := mc.Transport
	if tr == nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger,
		})
		if err != nil {
			return fmt.Errorf("transport: %w", err)
		}
		if mc.BindPort == 0 {
			mc.BindPort = nt.GetAutoBindPort()
			mc.AdvertisePort = mc.BindPort
		}
		tr = nt
	}
	na, ok := tr.(memberlist.NodeAwareTransport)
	if !ok {
		na = namedTransport{tr}
	}
	mc.Transport = redirectTransport{NodeAwareTransport: na, to: to}
	return nil
}

// namedTransport gives a transport that addresses by host:port alone
// (MemTransport) memberlist's interface that also names the member.
type namedTransport struct{ memberlist.Transport }

func (t namedTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}

func (t namedTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, timeout)
}
