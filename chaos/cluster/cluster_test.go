package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireEmulation skips the test unless this machine can run an emulated
// cluster: network namespaces can be created (probed with a throw-away
// namespace) and OpenSSH's sshd and ssh are installed.
func requireEmulation(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("emulated cluster: ip (iproute2) not installed; run chaos/install-deps.sh")
	}
	probe := fmt.Sprintf("ftcprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		tb.Skipf("emulated cluster: cannot create network namespaces here (ip netns add: %v: %s)", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "netns", "del", probe).CombinedOutput(); err != nil {
		tb.Fatalf("remove probe namespace %s: %v: %s", probe, err, out)
	}
	if _, err := os.Stat(DefaultSSHD); err != nil {
		tb.Skipf("emulated cluster: %s not installed (openssh-server); run chaos/install-deps.sh", DefaultSSHD)
	}
	for _, p := range []string{"ssh", "nsenter", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			tb.Skipf("emulated cluster: %s not installed; run chaos/install-deps.sh", p)
		}
	}
}

// testConfig names a cluster unique to this test run, with its state in a
// temporary directory.
func testConfig(tb testing.TB) Config {
	tb.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return Config{
		Name:           "t" + hex.EncodeToString(b)[:7],
		StateRoot:      tb.TempDir(),
		ConnectTimeout: 2 * time.Second,
	}
}

// upTest brings up a cluster for a test on a free random /24 in 10.100-199,
// and removes it when the test ends.
func upTest(tb testing.TB, cfg Config, n int) *Cluster {
	tb.Helper()
	ctx := context.Background()
	c, err := upFree(ctx, cfg, n)
	if err != nil {
		tb.Fatalf("Up: %v", err)
	}
	tb.Cleanup(func() {
		if err := c.Down(context.Background()); err != nil {
			tb.Errorf("Down: %v", err)
		}
	})
	return c
}

// randomPrefix is a random /24 in 10.100.0.0-10.199.255.0.
func randomPrefix() netip.Prefix {
	x, _ := rand.Int(rand.Reader, big.NewInt(100*256))
	v := int(x.Int64())
	return netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 100+v/256, v%256))
}

func mustExec(t *testing.T, c *Cluster, node string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Exec(ctx, node, argv...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(string(out))
}

// sshFrom runs the real OpenSSH client inside node from, with the generated
// configuration, to run command on host to.
func sshFrom(ctx context.Context, c *Cluster, from, to string, command string) (string, error) {
	out, err := c.Exec(ctx, from, "ssh", "-F", c.SSHConfig(), to, command)
	return strings.TrimSpace(string(out)), err
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(wait) // polling interval of a condition wait, not a timing assumption
		if wait < 200*time.Millisecond {
			wait *= 2
		}
	}
}

// leftovers lists what of the cluster still exists on the machine.
func leftovers(cfg Config, pids []int) []string {
	var left []string
	if ns, _ := listNetns(cfg.NetnsPrefix); len(ns) > 0 {
		left = append(left, fmt.Sprintf("namespaces %v", ns))
	}
	if l, _ := listLinks(cfg.VethPrefix); len(l) > 0 {
		left = append(left, fmt.Sprintf("veths %v", l))
	}
	if linkExists(cfg.Bridge) {
		left = append(left, "bridge "+cfg.Bridge)
	}
	for _, pid := range pids {
		if alive(pid) {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
	}
	if _, err := os.Stat(cfg.dir()); err == nil {
		left = append(left, "state directory "+cfg.dir())
	}
	return left
}

func clusterPIDs(t *testing.T, c *Cluster) []int {
	t.Helper()
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range st {
		pids = append(pids, s.HolderPID, s.SSHDPID)
	}
	return pids
}

func TestClusterLifecycle(t *testing.T) {
	requireEmulation(t)
	cfg := testConfig(t)
	c := upTest(t, cfg, 4)
	cfg = c.Config()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Each node has its own name, and names resolve inside nodes.
	for i := 1; i <= 4; i++ {
		if got := mustExec(t, c, nodeName(i), "hostname"); got != nodeName(i) {
			t.Errorf("hostname in %s = %q", nodeName(i), got)
		}
	}
	if got := mustExec(t, c, "node002", "getent", "hosts", "node004"); !strings.HasPrefix(got, cfg.nodeAddr(4).String()+" ") {
		t.Errorf("node004 resolves in node002 to %q, want %s", got, cfg.nodeAddr(4))
	}

	// The real OpenSSH client, the generated config and known_hosts.
	got, err := sshFrom(ctx, c, "node001", "node003", "hostname")
	if err != nil || got != "node003" {
		t.Fatalf("ssh node001 -> node003 hostname = %q, %v; want node003", got, err)
	}
	got, err = sshFrom(ctx, c, "node001", "node002", `echo "$FTCLUSTER_NODE $HOME $TMPDIR"`)
	want := fmt.Sprintf("node002 %s %s", homeDir(cfg), filepath.Join(nodeDir(cfg, "node002"), "tmp"))
	if err != nil || got != want {
		t.Errorf("session variables on node002 = %q, %v; want %q", got, err, want)
	}

	// An established connection to node003's sshd, from the machine.
	n3 := netip.AddrPortFrom(cfg.nodeAddr(3), 22).String()
	conn, err := net.DialTimeout("tcp", n3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 256)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(buf); err != nil || !strings.HasPrefix(string(buf[:n]), "SSH-2.0-") {
		t.Fatalf("banner from node003: %q, %v", buf[:n], err)
	}

	// Node crash.
	if err := c.Kill(ctx, "node003"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, err := sshFrom(ctx, c, "node001", "node003", "hostname"); err == nil {
		t.Errorf("ssh to killed node003 succeeded: %q", got)
	}
	if took := time.Since(start); took > cfg.ConnectTimeout+3*time.Second {
		t.Errorf("ssh to killed node003 took %v to fail, ConnectTimeout %v", took, cfg.ConnectTimeout)
	}
	// Silence on the established connection: no FIN, no RST.
	if _, err := conn.Write([]byte("SSH-2.0-probe\r\n")); err != nil {
		t.Fatalf("write to crashed node: %v", err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := conn.Read(buf); !isTimeout(err) {
		t.Errorf("read from crashed node003: %d bytes, %v; want a timeout (silence)", n, err)
	}
	// Silence for a new connection too.
	if c2, err := net.DialTimeout("tcp", n3, time.Second); !isTimeout(err) {
		if c2 != nil {
			c2.Close()
		}
		t.Errorf("dial crashed node003: %v; want a timeout (silence)", err)
	}
	if _, err := c.Exec(ctx, "node003", "true"); !errors.Is(err, ErrNodeDown) {
		t.Errorf("Exec on killed node: %v, want ErrNodeDown", err)
	}
	if err := c.Heal(ctx, "node003"); !errors.Is(err, ErrNodeDown) {
		t.Errorf("Heal of killed node: %v, want ErrNodeDown", err)
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	if s := st[2]; s.State != StateKilled || s.Procs != 0 || s.LinkUp || s.SSHDAlive {
		t.Errorf("status of killed node003: %+v", s)
	}

	// Reboot: same address and MAC, ssh works at once, the stale connection
	// gets RST on its next retransmission.
	if err := c.Revive(ctx, "node003"); err != nil {
		t.Fatal(err)
	}
	if got, err := sshFrom(ctx, c, "node001", "node003", "hostname"); err != nil || got != "node003" {
		t.Fatalf("ssh to revived node003 = %q, %v", got, err)
	}
	if got := mustExec(t, c, "node003", "cat", "/sys/class/net/eth0/address"); got != macFor(macNode, cfg.nodeAddr(3)).String() {
		t.Errorf("MAC of revived node003 = %s", got)
	}
	waitFor(t, 30*time.Second, "RST on the stale connection to revived node003", func() error {
		conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err := conn.Read(buf)
		if errors.Is(err, syscall.ECONNRESET) {
			return nil
		}
		return fmt.Errorf("read: %v", err)
	})

	// Partition and heal: the node keeps running, unreachable.
	if err := c.Partition(ctx, "node002"); err != nil {
		t.Fatal(err)
	}
	n2 := netip.AddrPortFrom(cfg.nodeAddr(2), 22).String()
	if c2, err := net.DialTimeout("tcp", n2, time.Second); !isTimeout(err) {
		if c2 != nil {
			c2.Close()
		}
		t.Errorf("dial partitioned node002: %v; want a timeout", err)
	}
	if got := mustExec(t, c, "node002", "hostname"); got != "node002" {
		t.Errorf("hostname in partitioned node002 = %q", got)
	}
	if err := c.Heal(ctx, "node002"); err != nil {
		t.Fatal(err)
	}
	if got, err := sshFrom(ctx, c, "node004", "node002", "hostname"); err != nil || got != "node002" {
		t.Errorf("ssh to healed node002 = %q, %v", got, err)
	}

	// Down leaves nothing behind.
	pids := clusterPIDs(t, c)
	if err := c.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(cfg, pids); len(left) > 0 {
		t.Errorf("after Down: %v", left)
	}
	if err := c.Down(ctx); err != nil {
		t.Errorf("second Down: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestUpCleansStale: a cluster left behind (its handle dropped, as by a
// crashed run) is removed by the next Up of the same name, and Clean removes
// namespaces even without a state file.
func TestUpCleansStale(t *testing.T) {
	requireEmulation(t)
	cfg := testConfig(t)
	old := upTest(t, cfg, 2)
	cfg = old.Config()
	oldPIDs := clusterPIDs(t, old)

	c, err := Up(context.Background(), cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range oldPIDs {
		if alive(pid) {
			t.Errorf("process %d of the stale cluster still runs", pid)
		}
	}
	if got := mustExec(t, c, "node003", "hostname"); got != "node003" {
		t.Errorf("hostname = %q", got)
	}
	pids := clusterPIDs(t, c)

	// A crash before the state was written: only kernel objects remain.
	if err := os.RemoveAll(cfg.dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); !errors.Is(err, errNoState) {
		t.Fatalf("Open without state: %v", err)
	}
	if err := Clean(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(cfg, pids); len(left) > 0 {
		t.Errorf("after Clean: %v", left)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{Name: "Upper"},
		{Name: "much-too-long"},
		{Name: "ok", StateRoot: "relative"},
		{Name: "ok", StateRoot: "/with space"},
		{Name: "ok", Prefix: netip.MustParsePrefix("fd00::/64")},
		{Name: "ok", Prefix: netip.MustParsePrefix("10.0.0.0/30")},
		{Name: "ok", VethPrefix: "abcdefghijklm"},
		{Name: "ok", Bridge: "okv-bridge", VethPrefix: "okv"},
		{Name: "ok", SSHD: "sshd"},
		{Name: "ok", MaxStartups: "10 30"},
	}
	for _, cfg := range bad {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) accepted", cfg)
		}
	}
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "ftc" || cfg.Bridge != "ftcbr" || cfg.VethPrefix != "ftcv" || cfg.NetnsPrefix != "ftc-" ||
		cfg.dir() != "/run/ftcluster/ftc" || cfg.Prefix.String() != "10.77.0.0/16" {
		t.Errorf("defaults: %+v", cfg)
	}
	if got := cfg.bridgeAddr().String(); got != "10.77.0.1" {
		t.Errorf("bridge address %s", got)
	}
	if got := cfg.nodeAddr(1).String(); got != "10.77.0.2" {
		t.Errorf("node001 address %s", got)
	}
	if got := cfg.nodeAddr(300).String(); got != "10.77.1.45" {
		t.Errorf("node300 address %s", got)
	}
	if got := macFor(macNode, cfg.nodeAddr(300)).String(); got != "02:f7:0a:4d:01:2d" {
		t.Errorf("node300 MAC %s", got)
	}
	if got := cfg.knownHostsPattern(); got != "node*,10.77.*" {
		t.Errorf("known_hosts pattern %s", got)
	}
	if got := cfg.maxNodes(); got != 65533 {
		t.Errorf("max nodes %d", got)
	}
	if got := cfg.vethName(7); got != "ftcv007" {
		t.Errorf("veth name %s", got)
	}
}

func TestGeneratedFiles(t *testing.T) {
	cfg, err := Config{Name: "gen", StateRoot: t.TempDir(), Prefix: netip.MustParsePrefix("10.9.8.0/24"), MaxStartups: "100:30:100"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	nodes := []Node{{Name: "node001", Index: 1, Addr: cfg.nodeAddr(1), Dir: nodeDir(cfg, "node001")}}
	if err := writeClusterFiles(cfg, nodes); err != nil {
		t.Fatal(err)
	}
	if err := writeNodeFiles(cfg, nodes[0]); err != nil {
		t.Fatal(err)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	kh := read(knownHosts(cfg))
	if !strings.HasPrefix(kh, "node*,10.9.8.* ssh-ed25519 AAAA") || strings.Count(kh, "\n") != 1 {
		t.Errorf("known_hosts: %q", kh)
	}
	sc := read(sshConfig(cfg))
	for _, want := range []string{"Host node001\n    HostName 10.9.8.2\n", "Host node* 10.9.8.*\n", "StrictHostKeyChecking yes", "ConnectTimeout 5\n", "IdentityFile " + clientKey(cfg)} {
		if !strings.Contains(sc, want) {
			t.Errorf("ssh config lacks %q:\n%s", want, sc)
		}
	}
	sd := read(filepath.Join(nodes[0].Dir, sshdConfigName))
	for _, want := range []string{"ListenAddress 10.9.8.2\n", "UsePAM no\n", "UseDNS no\n", "StrictModes no\n", "PasswordAuthentication no\n", "MaxStartups 100:30:100\n", "SetEnv FTCLUSTER_NAME=gen FTCLUSTER_NODE=node001 "} {
		if !strings.Contains(sd, want) {
			t.Errorf("sshd config lacks %q:\n%s", want, sd)
		}
	}
	if out, err := exec.Command(DefaultSSHD, "-t", "-f", filepath.Join(nodes[0].Dir, sshdConfigName)).CombinedOutput(); err != nil {
		if _, serr := os.Stat(DefaultSSHD); serr == nil {
			t.Errorf("sshd -t rejects the generated config: %v: %s", err, out)
		}
	}
	if fi, err := os.Stat(clientKey(cfg)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("client key: %v %v", fi, err)
	}
	if out, err := exec.Command("ssh-keygen", "-y", "-f", clientKey(cfg)).CombinedOutput(); err == nil {
		pub := read(clientKey(cfg) + ".pub")
		if !strings.HasPrefix(pub, strings.TrimSpace(string(out))) {
			t.Errorf("ssh-keygen -y = %q, .pub = %q", out, pub)
		}
	}
}
