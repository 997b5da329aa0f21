package cluster

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// Config names a cluster and everything it creates on the machine. The zero
// value of every field means its default (see the field comments); two
// clusters that should coexist need different Name and Prefix values.
type Config struct {
	// Name identifies the cluster (lower-case letters, digits and '-', at
	// most 8 characters so derived interface names fit in 15). Default "ftc".
	Name string
	// StateRoot is the directory holding one state directory per cluster,
	// StateRoot/Name. It is a fixed place so a later run can clean up after a
	// crashed one. Default "/run/ftcluster".
	StateRoot string
	// Prefix is the IPv4 network of the cluster: the bridge gets the first
	// host address (.1) and node i (1-based) the address 1+i. Default
	// 10.77.0.0/16.
	Prefix netip.Prefix
	// Bridge is the name of the Linux bridge. Default Name+"br".
	Bridge string
	// NetnsPrefix prefixes the network namespace names: a node's namespace is
	// NetnsPrefix+"node001". Default Name+"-".
	NetnsPrefix string
	// VethPrefix prefixes the host side of each node's veth pair: node i's is
	// VethPrefix followed by i in three or more digits. Default Name+"v".
	VethPrefix string
	// SSHD is the OpenSSH server binary, by absolute path. Default
	// "/usr/sbin/sshd".
	SSHD string
	// MaxStartups, if set, is written to sshd's MaxStartups (for example
	// "1000:30:1000"). Empty keeps OpenSSH's default, which launchers must
	// cope with.
	MaxStartups string
	// ConnectTimeout is the ConnectTimeout written into the generated ssh
	// client configuration. Default 5 s; it is rounded up to whole seconds.
	ConnectTimeout time.Duration
	// ReadyTimeout bounds how long Up and Revive wait for one node's sshd to
	// listen. Default 10 s.
	ReadyTimeout time.Duration
}

// Defaults used for a zero Config field.
const (
	DefaultName           = "ftc"
	DefaultStateRoot      = "/run/ftcluster"
	DefaultSSHD           = "/usr/sbin/sshd"
	DefaultConnectTimeout = 5 * time.Second
	DefaultReadyTimeout   = 10 * time.Second
)

// defaultPrefix is the cluster network used when Config.Prefix is unset.
var defaultPrefix = netip.MustParsePrefix("10.77.0.0/16")

// DefaultPrefix returns the network used when Config.Prefix is unset.
func DefaultPrefix() netip.Prefix { return defaultPrefix }

// HeadName is the host name given to the bridge address in every node's
// /etc/hosts: the machine itself as seen from the nodes.
const HeadName = "head"

// ifNameMax is the longest Linux interface name (IFNAMSIZ-1).
const ifNameMax = 15

// validName reports whether name is 1-8 of [a-z0-9-], starting with a
// letter or digit.
func validName(name string) bool {
	if len(name) < 1 || len(name) > 8 || name[0] == '-' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validIf reports whether s is one or more of [A-Za-z0-9_.-].
func validIf(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// withDefaults returns cfg with every zero field set to its default and the
// whole configuration validated.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if !validName(cfg.Name) {
		return cfg, fmt.Errorf("cluster name %q: want 1-8 of [a-z0-9-], starting with a letter or digit", cfg.Name)
	}
	if cfg.StateRoot == "" {
		cfg.StateRoot = DefaultStateRoot
	}
	if !filepath.IsAbs(cfg.StateRoot) || strings.ContainsAny(cfg.StateRoot, " \t\n\"'\\") {
		return cfg, fmt.Errorf("state root %q: want an absolute path without spaces or quotes", cfg.StateRoot)
	}
	cfg.StateRoot = filepath.Clean(cfg.StateRoot)
	if !cfg.Prefix.IsValid() {
		cfg.Prefix = defaultPrefix
	}
	cfg.Prefix = cfg.Prefix.Masked()
	if !cfg.Prefix.Addr().Is4() || cfg.Prefix.Bits() < 8 || cfg.Prefix.Bits() > 29 {
		return cfg, fmt.Errorf("prefix %s: want an IPv4 network between /8 and /29", cfg.Prefix)
	}
	if cfg.Bridge == "" {
		cfg.Bridge = cfg.Name + "br"
	}
	if cfg.NetnsPrefix == "" {
		cfg.NetnsPrefix = cfg.Name + "-"
	}
	if cfg.VethPrefix == "" {
		cfg.VethPrefix = cfg.Name + "v"
	}
	if len(cfg.Bridge) > ifNameMax || !validIf(cfg.Bridge) {
		return cfg, fmt.Errorf("bridge name %q: want at most %d of [A-Za-z0-9_.-]", cfg.Bridge, ifNameMax)
	}
	if len(cfg.VethPrefix)+3 > ifNameMax || !validIf(cfg.VethPrefix) {
		return cfg, fmt.Errorf("veth prefix %q: want at most %d of [A-Za-z0-9_.-]", cfg.VethPrefix, ifNameMax-3)
	}
	if strings.HasPrefix(cfg.Bridge, cfg.VethPrefix) {
		return cfg, fmt.Errorf("bridge name %q starts with the veth prefix %q", cfg.Bridge, cfg.VethPrefix)
	}
	if !validIf(cfg.NetnsPrefix) || strings.Contains(cfg.NetnsPrefix, "..") {
		return cfg, fmt.Errorf("netns prefix %q: want [A-Za-z0-9_.-]", cfg.NetnsPrefix)
	}
	if cfg.SSHD == "" {
		cfg.SSHD = DefaultSSHD
	}
	if !filepath.IsAbs(cfg.SSHD) {
		return cfg, fmt.Errorf("sshd %q: must be an absolute path (sshd re-executes itself)", cfg.SSHD)
	}
	if strings.ContainsAny(cfg.MaxStartups, " \t\n") {
		return cfg, fmt.Errorf("MaxStartups %q: no spaces allowed", cfg.MaxStartups)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	return cfg, nil
}

// dir is the state directory of the cluster.
func (cfg Config) dir() string { return filepath.Join(cfg.StateRoot, cfg.Name) }

// maxNodes is how many node addresses fit in the prefix besides the network,
// bridge and broadcast addresses.
func (cfg Config) maxNodes() int {
	return 1<<(32-cfg.Prefix.Bits()) - 3
}

// addrAt returns the address at offset off from the network address.
func (cfg Config) addrAt(off int) netip.Addr {
	b := cfg.Prefix.Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(off)
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// bridgeAddr is the bridge's address: the first host address of the prefix.
func (cfg Config) bridgeAddr() netip.Addr { return cfg.addrAt(1) }

// nodeAddr is the address of node i (1-based).
func (cfg Config) nodeAddr(i int) netip.Addr { return cfg.addrAt(1 + i) }

// nodeName is the host name of node i (1-based): node001, node002, ...
func nodeName(i int) string { return fmt.Sprintf("node%03d", i) }

func (cfg Config) netnsName(i int) string { return cfg.NetnsPrefix + nodeName(i) }
func (cfg Config) vethName(i int) string  { return fmt.Sprintf("%s%03d", cfg.VethPrefix, i) }

// macFor derives a fixed, locally administered unicast MAC from an IPv4
// address: kind, then the four address bytes. A node brought back keeps its
// MAC, so peers' neighbour caches stay valid.
func macFor(kind byte, a netip.Addr) net.HardwareAddr {
	b := a.As4()
	return net.HardwareAddr{0x02, kind, b[0], b[1], b[2], b[3]}
}

// MAC kinds: the node's interface (and the bridge), and the host side of veths.
const (
	macNode byte = 0xf7
	macHost byte = 0xf8
)

// knownHostsPattern is the host pattern of the wildcard known_hosts line:
// every node name and every address in the prefix's leading whole octets.
func (cfg Config) knownHostsPattern() string {
	b := cfg.Prefix.Addr().As4()
	octets := cfg.Prefix.Bits() / 8
	parts := make([]string, 0, 4)
	for i := 0; i < octets; i++ {
		parts = append(parts, fmt.Sprint(b[i]))
	}
	parts = append(parts, "*")
	return "node*," + strings.Join(parts, ".")
}
