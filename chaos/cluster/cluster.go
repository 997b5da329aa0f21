package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Cluster is a handle on an emulated cluster: one that Up created or that
// Open found in its state directory. The state directory is the record;
// every operation re-reads it under a lock on the state root, so the
// ftcluster command and a test can act on the same cluster in turn.
//
// A Cluster is safe for concurrent use; fault operations are serialised.
// Processes the handle started (the nodes' namespace holders) are reaped by
// the fault operations and Down; a handle that is dropped without Down
// leaves the cluster running, and a later Up of the same name or Down of a
// handle from Open removes it.
type Cluster struct {
	cfg Config

	opMu sync.Mutex // serialises operations within this process

	hmu     sync.Mutex
	holders map[string]*exec.Cmd // node name → holder started by this handle, for reaping; guarded by hmu
	slow    map[string]*SlowLink // node name → active slow link; guarded by hmu
}

// Up brings up a cluster of n nodes named by cfg. A cluster of the same name
// left by an earlier run (crashed or not) is removed first. On error, what
// was created is removed again.
func Up(ctx context.Context, cfg Config, n int) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if n < 1 || n > cfg.maxNodes() {
		return nil, fmt.Errorf("cluster %q: %d nodes: want 1 to %d for prefix %s", cfg.Name, n, cfg.maxNodes(), cfg.Prefix)
	}
	if len(cfg.vethName(n)) > ifNameMax {
		return nil, fmt.Errorf("cluster %q: %d nodes: veth name %q too long", cfg.Name, n, cfg.vethName(n))
	}
	if err := checkTools(cfg); err != nil {
		return nil, err
	}
	unlock, err := lockRoot(ctx, cfg.StateRoot)
	if err != nil {
		return nil, err
	}
	defer unlock()

	c := &Cluster{cfg: cfg, holders: make(map[string]*exec.Cmd)}
	if err := clean(ctx, cfg, c); err != nil {
		return nil, fmt.Errorf("clean stale cluster %q: %w", cfg.Name, err)
	}
	if err := checkPrefixFree(cfg); err != nil {
		return nil, err
	}
	if err := c.create(ctx, n); err != nil {
		// Clean with a fresh context: ctx may be the reason for the failure.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if cerr := clean(cctx, cfg, c); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after failed start: %w", cerr))
		}
		return nil, err
	}
	return c, nil
}

// Open returns a handle on the running cluster named by cfg (only Name and
// StateRoot matter; the rest is read from the state directory).
func Open(cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	st, err := loadState(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{cfg: st.Config, holders: make(map[string]*exec.Cmd)}, nil
}

// Clean removes whatever exists of the cluster named by cfg, whether or not
// its state directory survived: every process in its namespaces, the
// namespaces, veths, bridge and state directory. Removing nothing is not an
// error.
func Clean(ctx context.Context, cfg Config) error {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	unlock, err := lockRoot(ctx, cfg.StateRoot)
	if err != nil {
		return err
	}
	defer unlock()
	return clean(ctx, cfg, nil)
}

// Down removes the cluster: it kills every process in the nodes'
// namespaces (found by namespace, never by name), deletes the namespaces and
// the bridge in one ip -batch, waits for the kernel to drop the veths, and
// removes the state directory. Down of a cluster already down is a no-op.
func (c *Cluster) Down(ctx context.Context) error {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	unlock, err := lockRoot(ctx, c.cfg.StateRoot)
	if err != nil {
		return err
	}
	defer unlock()
	c.stopAllSlow()
	return clean(ctx, c.cfg, c)
}

// Config returns the cluster's configuration with all defaults filled in.
func (c *Cluster) Config() Config { return c.cfg }

// Dir is the cluster's state directory.
func (c *Cluster) Dir() string { return c.cfg.dir() }

// SSHConfig is the path of the OpenSSH client configuration for the nodes
// (use `ssh -F PATH node001 ...`, from the machine or from inside a node).
func (c *Cluster) SSHConfig() string { return sshConfig(c.cfg) }

// KnownHosts is the path of the known_hosts file (one wildcard line).
func (c *Cluster) KnownHosts() string { return knownHosts(c.cfg) }

// IdentityFile is the path of the client's private key (ed25519, OpenSSH
// format), authorised for root on every node.
func (c *Cluster) IdentityFile() string { return clientKey(c.cfg) }

// BridgeAddr is the machine's own address on the cluster network; nodes know
// it as HeadName.
func (c *Cluster) BridgeAddr() netip.Addr { return c.cfg.bridgeAddr() }

// Nodes returns a snapshot of every node, in index order.
func (c *Cluster) Nodes() ([]Node, error) {
	st, err := loadState(c.cfg)
	if err != nil {
		return nil, err
	}
	return st.Nodes, nil
}

// Node returns a snapshot of one node.
func (c *Cluster) Node(name string) (Node, error) {
	st, err := loadState(c.cfg)
	if err != nil {
		return Node{}, err
	}
	n, err := st.node(name)
	if err != nil {
		return Node{}, err
	}
	return *n, nil
}

// checkTools verifies the programs the cluster runs are present.
func checkTools(cfg Config) error {
	for _, p := range []string{"ip", "nsenter", "unshare", "hostname", "mount", "sleep"} {
		if _, err := exec.LookPath(p); err != nil {
			return fmt.Errorf("emulated cluster needs %s (install iproute2 and util-linux): %w", p, err)
		}
	}
	if _, err := os.Stat(cfg.SSHD); err != nil {
		return fmt.Errorf("emulated cluster needs sshd (install openssh-server): %w", err)
	}
	return nil
}

// checkPrefixFree fails if an interface of the machine already has an
// address in the cluster's prefix: two clusters need different prefixes.
func checkPrefixFree(cfg Config) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			p := netip.PrefixFrom(ip.Unmap(), ones)
			if p.Overlaps(cfg.Prefix) {
				return fmt.Errorf("cluster %q: prefix %s overlaps %s on interface %s: %w", cfg.Name, cfg.Prefix, p, ifc.Name, ErrPrefixInUse)
			}
		}
	}
	return nil
}

// ErrPrefixInUse reports that the cluster's network overlaps an address the
// machine already has (another cluster, or a real network).
var ErrPrefixInUse = errors.New("prefix in use")

// create builds the cluster; the caller holds the root lock and cleans up on
// error.
func (c *Cluster) create(ctx context.Context, n int) error {
	cfg := c.cfg
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // sshd's privilege separation directory
		return fmt.Errorf("create /run/sshd: %w", err)
	}
	if err := os.MkdirAll(cfg.dir(), 0o755); err != nil {
		return fmt.Errorf("create state directory: %w", err)
	}
	st := &state{Version: stateVersion, Config: cfg, Nodes: make([]Node, n)}
	for i := 1; i <= n; i++ {
		name := nodeName(i)
		st.Nodes[i-1] = Node{
			Name:  name,
			Index: i,
			Addr:  cfg.nodeAddr(i),
			MAC:   macFor(macNode, cfg.nodeAddr(i)).String(),
			Netns: cfg.netnsName(i),
			Veth:  cfg.vethName(i),
			Dir:   nodeDir(cfg, name),
			State: StateKilled, // until booted
		}
	}
	// Record the state before creating anything in the kernel, so that a
	// crash from here on leaves a cluster the next Up or Clean can remove.
	if err := st.save(); err != nil {
		return err
	}
	if err := writeClusterFiles(cfg, st.Nodes); err != nil {
		return err
	}
	lines := []string{
		fmt.Sprintf("link add %s address %s type bridge", cfg.Bridge, macFor(macNode, cfg.bridgeAddr())),
		fmt.Sprintf("addr add %s/%d dev %s", cfg.bridgeAddr(), cfg.Prefix.Bits(), cfg.Bridge),
		fmt.Sprintf("link set %s up", cfg.Bridge),
	}
	for _, nd := range st.Nodes {
		lines = append(lines, linkLines(cfg, nd)...)
	}
	if err := ipBatch(ctx, false, lines); err != nil {
		return fmt.Errorf("create cluster network: %w", err)
	}
	err := c.bootAll(ctx, st.Nodes)
	if serr := st.save(); serr != nil {
		err = errors.Join(err, serr)
	}
	return err
}

// linkLines are the ip -batch commands that create a node's namespace and
// its veth pair onto the bridge, both ends with fixed MACs.
func linkLines(cfg Config, nd Node) []string {
	return []string{
		"netns add " + nd.Netns,
		fmt.Sprintf("link add %s address %s type veth peer name eth0 address %s netns %s",
			nd.Veth, macFor(macHost, nd.Addr), nd.MAC, nd.Netns),
		fmt.Sprintf("link set %s master %s up", nd.Veth, cfg.Bridge),
	}
}

// bootAll boots the nodes a few at a time; it returns once every boot has
// finished.
func (c *Cluster) bootAll(ctx context.Context, nodes []Node) error {
	workers := 2 * runtime.GOMAXPROCS(0)
	if workers > len(nodes) {
		workers = len(nodes)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		next = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := c.boot(ctx, &nodes[i]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range nodes {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// holderScript runs inside the node's network namespace and fresh UTS and
// mount namespaces. It names the host, gives it its /etc/hosts and a
// /sys/class/net that shows its own interfaces (a sysfs mounted inside the
// namespace, of which only the net directories are bound over the machine's
// /sys, so /sys/fs/cgroup stays), configures its interfaces, starts its
// sshd, reports "ready" and then stays, as `sleep infinity`, to hold the
// namespaces for Exec.
const holderScript = `set -e
hostname "$1"
mount --bind "$2" /etc/hosts
mount -t sysfs sysfs "$7"
mount --bind "$7/class/net" /sys/class/net
mount --bind "$7/devices/virtual/net" /sys/devices/virtual/net
umount -l "$7"
ip -batch - <<EOF
link set lo up
addr add $3 dev eth0
link set eth0 up
EOF
"$4" -f "$5" -E "$6"
echo ready
exec sleep infinity </dev/null >/dev/null 2>&1
`

// boot starts node nd's holder and sshd and fills in their pids. The caller
// has created the namespace and veth.
func (c *Cluster) boot(ctx context.Context, nd *Node) error {
	cfg := c.cfg
	if err := writeNodeFiles(cfg, *nd); err != nil {
		return fmt.Errorf("boot %s: %w", nd.Name, err)
	}
	logPath := filepath.Join(nd.Dir, holderLogName)
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("boot %s: %w", nd.Name, err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("boot %s: %w", nd.Name, err)
	}
	defer r.Close()
	sshdLog := filepath.Join(nd.Dir, sshdLogName)
	// The holder must outlive ctx (and this process, for the command), so
	// it is not tied to ctx and gets its own session.
	cmd := exec.Command("nsenter", "--net="+filepath.Join(netnsDir, nd.Netns), "--",
		"unshare", "--uts", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", holderScript, "ftcluster-holder",
		nd.Name, hostsFile(cfg), fmt.Sprintf("%s/%d", nd.Addr, cfg.Prefix.Bits()),
		cfg.SSHD, filepath.Join(nd.Dir, sshdConfigName), sshdLog,
		filepath.Join(nd.Dir, "sys"))
	cmd.Stdout = w
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("boot %s: start holder: %w", nd.Name, err)
	}
	w.Close()
	c.hmu.Lock()
	c.holders[nd.Name] = cmd
	c.hmu.Unlock()

	fail := func(err error) error {
		_ = cmd.Process.Kill()
		return fmt.Errorf("boot %s: %w%s%s", nd.Name, err, logTail(logPath), logTail(sshdLog))
	}
	deadline := time.Now().Add(cfg.ReadyTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := r.SetReadDeadline(deadline); err != nil {
		return fail(fmt.Errorf("wait for holder: %w", err))
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "ready\n" {
		return fail(fmt.Errorf("holder did not get ready: %q, %v", line, err))
	}
	// sshd writes its pid file once it listens.
	pidPath := filepath.Join(nd.Dir, sshdPidName)
	var sshdPID int
	err = Poll(ctx, time.Until(deadline), "wait for sshd pid file", func() (bool, error) {
		b, err := os.ReadFile(pidPath)
		if err != nil {
			return false, nil
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return false, nil // partly written
		}
		sshdPID = pid
		return true, nil
	})
	if err != nil {
		return fail(err)
	}
	nd.HolderPID = cmd.Process.Pid
	nd.SSHDPID = sshdPID
	nd.State = StateUp
	nd.Boots++
	return nil
}

// logTail formats the end of a log file for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 512 {
		b = b[len(b)-512:]
	}
	return fmt.Sprintf("\n%s: %s", filepath.Base(path), strings.TrimSpace(string(b)))
}

// reap waits for the holder this handle started for node, if any. The caller
// has killed it, so this does not block for long.
func (c *Cluster) reap(node string) {
	c.hmu.Lock()
	cmd := c.holders[node]
	delete(c.holders, node)
	c.hmu.Unlock()
	if cmd != nil {
		_ = cmd.Wait() // killed: the error is the signal
	}
}

// clean removes everything of the cluster named by cfg and by the state it
// left, if any. The caller holds the root lock. c, if not nil, is the handle
// whose holders should be reaped.
func clean(ctx context.Context, cfg Config, c *Cluster) error {
	cfgs := []Config{cfg}
	var nsNames, veths []string
	if st, err := loadState(cfg); err == nil {
		cfgs = append(cfgs, st.Config)
		for _, nd := range st.Nodes {
			nsNames = append(nsNames, nd.Netns)
			veths = append(veths, nd.Veth)
		}
	}
	var bridges []string
	for _, k := range cfgs {
		ns, err := listNetns(k.NetnsPrefix)
		if err != nil {
			return err
		}
		nsNames = append(nsNames, ns...)
		bridges = append(bridges, k.Bridge)
	}
	slices.Sort(nsNames)
	nsNames = slices.Compact(nsNames)
	slices.Sort(bridges)
	bridges = slices.Compact(bridges)

	kctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := killNetns(kctx, nsNames); err != nil {
		return err
	}
	if c != nil {
		c.hmu.Lock()
		var owned []string
		for name := range c.holders {
			owned = append(owned, name)
		}
		c.hmu.Unlock()
		for _, name := range owned {
			c.reap(name)
		}
	}

	var lines []string
	for _, ns := range nsNames {
		lines = append(lines, "netns del "+ns)
	}
	for _, br := range bridges {
		if linkExists(br) {
			lines = append(lines, "link del "+br)
		}
	}
	var batchErr error
	if len(lines) > 0 {
		batchErr = ipBatch(ctx, true, lines)
	}
	// The veths go when the kernel destroys the namespaces, which it does
	// in the background; wait for that, then delete any that stayed.
	vethLeft := func() ([]string, error) {
		var left []string
		for _, k := range cfgs {
			l, err := listLinks(k.VethPrefix)
			if err != nil {
				return nil, err
			}
			left = append(left, l...)
		}
		for _, v := range veths {
			if linkExists(v) {
				left = append(left, v)
			}
		}
		slices.Sort(left)
		return slices.Compact(left), nil
	}
	err := Poll(ctx, 5*time.Second, "wait for veths to go", func() (bool, error) {
		left, err := vethLeft()
		return len(left) == 0, err
	})
	if err != nil {
		left, lerr := vethLeft()
		if lerr != nil {
			return lerr
		}
		for _, v := range left {
			if err := ipCmd(ctx, "link", "del", v); err != nil && linkExists(v) {
				return fmt.Errorf("remove veth: %w", err)
			}
		}
	}
	for _, br := range bridges {
		if linkExists(br) {
			return fmt.Errorf("bridge %s still exists after removal: %v", br, batchErr)
		}
	}
	if left, _ := listNetns(cfg.NetnsPrefix); len(left) > 0 {
		return fmt.Errorf("namespaces still exist after removal: %v: %v", left, batchErr)
	}
	for _, k := range cfgs {
		if err := os.RemoveAll(k.dir()); err != nil {
			return fmt.Errorf("remove state directory: %w", err)
		}
	}
	return nil
}
